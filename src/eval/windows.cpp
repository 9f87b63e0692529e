#include <algorithm>
#include <string>

#include "diffnet/common.h"
#include "diffnet/predict.h"

namespace diffnet {

int64_t padded_extent(int64_t size, int64_t window) {
  if (size <= 0) throw Error("image", "empty image");
  return std::max(window, (size + 7) / 8 * 8);
}

std::vector<int64_t> window_origins(int64_t extent, int64_t window, int64_t stride) {
  if (window <= 0 || window % 32 != 0)
    throw Error("window", "window size " + std::to_string(window) + " must be a positive multiple of 32");
  if (stride < 8 || stride > window || stride % 8 != 0)
    throw Error("stride", "stride " + std::to_string(stride) + " must be a multiple of 8 in [8, window]");
  if (extent < window || extent % 8 != 0)
    throw Error("window_origins", "canvas extent " + std::to_string(extent) + " must be a multiple of 8 >= window");
  std::vector<int64_t> origins;
  int64_t o = 0;
  for (; o + window < extent; o += stride) origins.push_back(o);
  origins.push_back(extent - window);  // ends at the border; a multiple of 8 since both terms are
  return origins;
}

std::vector<WindowPos> plan_windows(int64_t height, int64_t width, int64_t window, int64_t stride) {
  std::vector<int64_t> ys = window_origins(padded_extent(height, window), window, stride);
  std::vector<int64_t> xs = window_origins(padded_extent(width, window), window, stride);
  std::vector<WindowPos> out;
  out.reserve(ys.size() * xs.size());
  for (int64_t y : ys)
    for (int64_t x : xs) out.push_back({y, x});
  return out;
}

void max_merge(at::Tensor& canvas, const at::Tensor& window_prob, const WindowPos& pos) {
  at::Tensor dst = canvas.slice(0, pos.y, pos.y + window_prob.size(0)).slice(1, pos.x, pos.x + window_prob.size(1));
  if (dst.sizes() != window_prob.sizes()) throw Error("max_merge", "window outside the canvas");
  dst.copy_(at::maximum(dst, window_prob.to(dst.scalar_type())));
}

}  // namespace diffnet
