// Minimal 8-bit raster type and the pixel operations the generator needs (crop, paste, resize, blur,
// rotation, statistics). Boxes are half-open: [x0, x1) x [y0, y1).
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace diffnet::synth {

struct Box {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  int w() const { return x1 - x0; }
  int h() const { return y1 - y0; }
  bool empty() const { return x1 <= x0 || y1 <= y0; }
  int64_t area() const { return empty() ? 0 : int64_t(w()) * h(); }
  Box expand(int m) const { return {x0 - m, y0 - m, x1 + m, y1 + m}; }
  Box clip(int W, int H) const {
    return {std::max(x0, 0), std::max(y0, 0), std::min(x1, W), std::min(y1, H)};
  }
  bool intersects(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
  bool contains(const Box& o) const { return o.x0 >= x0 && o.y0 >= y0 && o.x1 <= x1 && o.y1 <= y1; }
  Box unite(const Box& o) const {
    if (empty()) return o;
    if (o.empty()) return *this;
    return {std::min(x0, o.x0), std::min(y0, o.y0), std::max(x1, o.x1), std::max(y1, o.y1)};
  }
  Box shift(int dx, int dy) const { return {x0 + dx, y0 + dy, x1 + dx, y1 + dy}; }
  bool operator==(const Box& o) const { return x0 == o.x0 && y0 == o.y0 && x1 == o.x1 && y1 == o.y1; }
};

using Color = std::array<double, 3>;

// Interleaved 8-bit image with c channels (3 = RGB, 1 = gray/mask), row-major.
struct Raster {
  int w = 0, h = 0, c = 3;
  std::vector<uint8_t> data;
  Raster() = default;
  Raster(int w_, int h_, int c_ = 3, uint8_t fill = 0)
      : w(w_), h(h_), c(c_), data(size_t(w_) * h_ * c_, fill) {}
  uint8_t* px(int x, int y) { return data.data() + (size_t(y) * w + x) * c; }
  const uint8_t* px(int x, int y) const { return data.data() + (size_t(y) * w + x) * c; }
  bool empty() const { return w <= 0 || h <= 0; }
  Box bounds() const { return {0, 0, w, h}; }
};

// Conversions to/from the io module's tensors: uint8 (H, W, 3) / (H, W).
at::Tensor to_tensor(const Raster& r);
Raster from_tensor(const at::Tensor& t);  // (H,W,3) -> RGB raster, (H,W) -> 1-channel raster

// Copy of the box (clipped to the raster).
Raster crop(const Raster& r, const Box& b);
// Writes src with its top-left at (x, y), clipped to dst.
void paste(Raster& dst, const Raster& src, int x, int y);
// Bilinear resize with half-pixel centres (OpenCV INTER_LINEAR convention, edges clamped), rounded.
Raster resize_bilinear(const Raster& src, int w, int h);
// Area-average downscale (each output pixel = mean of its source footprint); for shrinking pages.
Raster resize_area(const Raster& src, int w, int h);
// Separable Gaussian blur (sigma in px, radius ceil(3 sigma), edges clamped); sigma <= 0 copies.
Raster gaussian_blur(const Raster& src, double sigma);
// Rotation by angle_deg about the centre, bilinear, same size, uncovered area filled with `fill`.
Raster rotate(const Raster& src, double angle_deg, const Color& fill);
// Rotation used by rotate(): maps a source point to its position in the rotated image.
void rotate_point(double angle_deg, int w, int h, double x, double y, double* ox, double* oy);

// Luma L = (19595R + 38470G + 7471B + 32768) >> 16 of an RGB raster (1-channel raster).
Raster luma(const Raster& rgb);
// Otsu threshold of the luma values inside box (256-bin histogram); returns t: ink = L <= t.
int otsu_threshold(const Raster& gray, const Box& b);
// Mean RGB of pixels in box whose luma is <= t (ink = true) or > t (ink = false); fallback if none.
Color mean_color(const Raster& rgb, const Raster& gray, const Box& b, int t, bool ink, const Color& fallback);
// Mean and standard deviation of luma over box.
void luma_stats(const Raster& gray, const Box& b, double* mean, double* sd);
// Mean and standard deviation of luma over the ring (box expanded by `width`, minus the box).
void ring_stats(const Raster& gray, const Box& b, int width, double* mean, double* sd);

// Clamp + round to uint8.
inline uint8_t to_u8(double v) { return static_cast<uint8_t>(v <= 0 ? 0 : v >= 255 ? 255 : v + 0.5); }

// Standard-normal lookup table (65536 entries, exact inverse-CDF quantiles) for fast pixel noise.
const std::vector<float>& normal_table();

}  // namespace diffnet::synth
