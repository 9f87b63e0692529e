#include "diffnet/regions.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "diffnet/common.h"

namespace diffnet {

at::Tensor prob_to_u8(const at::Tensor& prob) {
  // round() in ATen is half-to-even; floor(x + 0.5) is half-up (x >= 0 here), matching Python's
  // `(p * 255 + 0.5).astype(uint8)` and most tools.
  return (prob.to(at::kFloat) * 255.0f + 0.5f).floor().clamp(0, 255).to(at::kByte);
}

std::vector<Region> find_regions(const at::Tensor& prob, double threshold, int64_t min_area) {
  if (prob.dim() != 2) throw Error("find_regions", "probability map must be (H, W)");
  at::Tensor p = prob.to(at::kFloat).contiguous();
  const int64_t H = p.size(0), W = p.size(1);
  const float* pp = p.data_ptr<float>();
  const float thr = float(threshold);
  std::vector<uint8_t> seen(size_t(H * W), 0);
  std::vector<int64_t> stack;
  std::vector<Region> regions;
  for (int64_t start = 0; start < H * W; ++start) {
    if (seen[start] || !(pp[start] > thr)) continue;
    // Flood fill (8-connectivity) from `start`.
    Region r;
    int64_t x0 = W, y0 = H, x1 = -1, y1 = -1;
    double sum = 0, peak = 0;
    seen[start] = 1;
    stack.assign(1, start);
    while (!stack.empty()) {
      int64_t i = stack.back();
      stack.pop_back();
      int64_t y = i / W, x = i % W;
      x0 = std::min(x0, x), x1 = std::max(x1, x);
      y0 = std::min(y0, y), y1 = std::max(y1, y);
      ++r.area;
      sum += pp[i];
      peak = std::max(peak, double(pp[i]));
      for (int64_t dy = -1; dy <= 1; ++dy) {
        int64_t ny = y + dy;
        if (ny < 0 || ny >= H) continue;
        for (int64_t dx = -1; dx <= 1; ++dx) {
          int64_t nx = x + dx;
          if (nx < 0 || nx >= W) continue;
          int64_t j = ny * W + nx;
          if (!seen[j] && pp[j] > thr) {
            seen[j] = 1;
            stack.push_back(j);
          }
        }
      }
    }
    if (r.area < min_area) continue;
    r.x = x0, r.y = y0, r.w = x1 - x0 + 1, r.h = y1 - y0 + 1;
    r.peak = peak;
    r.mean = sum / double(r.area);
    regions.push_back(r);
  }
  std::sort(regions.begin(), regions.end(), [](const Region& a, const Region& b) {
    if (a.area != b.area) return a.area > b.area;
    if (a.y != b.y) return a.y < b.y;
    return a.x < b.x;
  });
  return regions;
}

nlohmann::json region_to_json(const Region& r) {
  return {{"bbox", {r.x, r.y, r.w, r.h}}, {"area", r.area}, {"peak", r.peak}, {"mean", r.mean}};
}

at::Tensor render_overlay(const at::Tensor& rgb, const at::Tensor& prob, const std::vector<Region>& regions) {
  if (rgb.dim() != 3 || rgb.size(2) != 3 || prob.dim() != 2 || rgb.size(0) != prob.size(0) ||
      rgb.size(1) != prob.size(1))
    throw Error("render_overlay", "image (H, W, 3) and probability map (H, W) must match");
  const int64_t H = rgb.size(0), W = rgb.size(1);
  at::Tensor c = rgb.to(at::kFloat);
  // Luma (BT.601 weights), dimmed so that the heat colours stand out: black -> 40, white -> 231.
  at::Tensor grey = (c.select(2, 0) * 0.299f + c.select(2, 1) * 0.587f + c.select(2, 2) * 0.114f) * 0.75f + 40.0f;
  at::Tensor p = prob.to(at::kFloat).clamp(0, 1);
  at::Tensor alpha = ((p - 0.1f) / 0.4f).clamp(0, 1) * 0.8f;      // 0 below p = 0.1, 0.8 from p = 0.5
  at::Tensor t = ((p - 0.5f) / 0.5f).clamp(0, 1);                  // red at p <= 0.5, yellow at p = 1
  at::Tensor heat = at::stack({at::full_like(p, 255.0f), t * 230.0f, at::zeros_like(p)}, 2);
  at::Tensor a3 = alpha.unsqueeze(2);
  at::Tensor out = grey.unsqueeze(2) * (1 - a3) + heat * a3;
  out = (out + 0.5f).floor().clamp(0, 255).to(at::kByte).contiguous();

  const int64_t thick = std::max<int64_t>(2, std::min(H, W) / 300);
  at::Tensor colour = at::tensor({0, 110, 255}, at::kByte);
  auto fill = [&](int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
    y0 = std::clamp<int64_t>(y0, 0, H), y1 = std::clamp<int64_t>(y1, 0, H);
    x0 = std::clamp<int64_t>(x0, 0, W), x1 = std::clamp<int64_t>(x1, 0, W);
    if (y0 < y1 && x0 < x1) out.slice(0, y0, y1).slice(1, x0, x1).copy_(colour.view({1, 1, 3}).expand({y1 - y0, x1 - x0, 3}));
  };
  for (const Region& r : regions) {
    // The rectangle is drawn just outside the box so that the region itself stays visible.
    int64_t bx0 = r.x - thick, by0 = r.y - thick, bx1 = r.x + r.w + thick, by1 = r.y + r.h + thick;
    fill(by0, r.y, bx0, bx1);           // top
    fill(r.y + r.h, by1, bx0, bx1);     // bottom
    fill(by0, by1, bx0, r.x);           // left
    fill(by0, by1, r.x + r.w, bx1);     // right
  }
  return out;
}

}  // namespace diffnet
