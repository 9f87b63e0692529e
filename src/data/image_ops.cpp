// Augmentation image operations: plain loops over uint8 (H, W, C) / (H, W) tensors.
#include "data/image_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "diffnet/common.h"

namespace diffnet::data {
namespace {

struct Shape {
  int64_t h, w, c;
};

Shape shape_of(const at::Tensor& img) {
  if (img.scalar_type() != at::kByte || (img.dim() != 2 && img.dim() != 3))
    throw Error("image op", "expected uint8 (H, W) or (H, W, C)");
  return {img.size(0), img.size(1), img.dim() == 3 ? img.size(2) : 1};
}

at::Tensor alloc_like(const at::Tensor& img, int64_t h, int64_t w, at::ScalarType type = at::kByte) {
  if (img.dim() == 3) return at::empty({h, w, img.size(2)}, type);
  return at::empty({h, w}, type);
}

uint8_t to_u8(double v) {
  v = std::nearbyint(v);
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

double filter_support(Filter f) {
  switch (f) {
    case Filter::Bilinear: return 1.0;
    case Filter::Bicubic: return 2.0;
    case Filter::Lanczos: return 3.0;
    default: return 0.5;
  }
}

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return std::sin(x) / x;
}

double filter_weight(Filter f, double x) {
  x = std::fabs(x);
  switch (f) {
    case Filter::Bilinear: return x < 1.0 ? 1.0 - x : 0.0;
    case Filter::Bicubic: {
      const double a = -0.5;
      if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
      if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
      return 0.0;
    }
    case Filter::Lanczos: return x < 3.0 ? sinc(x) * sinc(x / 3.0) : 0.0;
    default: return x < 0.5 ? 1.0 : 0.0;
  }
}

// Per-output-coordinate taps of a 1-D resampling (PIL's precompute_coeffs, in double).
struct Taps {
  std::vector<int64_t> first;
  std::vector<int64_t> count;
  std::vector<double> weight;  // out * max_taps
  int64_t max_taps = 0;
};

Taps make_taps(int64_t in, int64_t out, Filter f) {
  Taps t;
  double scale = static_cast<double>(in) / static_cast<double>(out);
  double fscale = std::max(scale, 1.0);
  double support = filter_support(f) * fscale;
  t.max_taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(out);
  t.count.resize(out);
  t.weight.assign(static_cast<size_t>(out * t.max_taps), 0.0);
  for (int64_t x = 0; x < out; ++x) {
    double center = (x + 0.5) * scale;
    int64_t lo = std::max<int64_t>(static_cast<int64_t>(std::floor(center - support + 0.5)), 0);
    int64_t hi = std::min<int64_t>(static_cast<int64_t>(std::floor(center + support + 0.5)), in);
    if (hi <= lo) {  // degenerate: take the nearest pixel
      lo = std::min<int64_t>(static_cast<int64_t>(center), in - 1);
      hi = lo + 1;
    }
    hi = std::min(hi, lo + t.max_taps);
    double* w = &t.weight[static_cast<size_t>(x * t.max_taps)];
    double sum = 0;
    for (int64_t j = lo; j < hi; ++j) sum += (w[j - lo] = filter_weight(f, (j - center + 0.5) / fscale));
    if (sum != 0)
      for (int64_t j = 0; j < hi - lo; ++j) w[j] /= sum;
    t.first[x] = lo;
    t.count[x] = hi - lo;
  }
  return t;
}

int64_t reflect(int64_t i, int64_t n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * n - 2 - i;
  return i;
}

// Copies src into dst at (top, left), clipping what falls outside dst.
void paste(const at::Tensor& src, at::Tensor& dst, int64_t top, int64_t left) {
  Shape s = shape_of(src), d = shape_of(dst);
  int64_t y0 = std::max<int64_t>(0, top), y1 = std::min(d.h, top + s.h);
  int64_t x0 = std::max<int64_t>(0, left), x1 = std::min(d.w, left + s.w);
  if (y1 <= y0 || x1 <= x0) return;
  const uint8_t* sp = src.data_ptr<uint8_t>();
  uint8_t* dp = dst.data_ptr<uint8_t>();
  for (int64_t y = y0; y < y1; ++y)
    std::memcpy(dp + (y * d.w + x0) * d.c, sp + ((y - top) * s.w + (x0 - left)) * s.c,
                static_cast<size_t>((x1 - x0) * s.c));
}

}  // namespace

at::Tensor resize(const at::Tensor& img_in, int64_t out_h, int64_t out_w, Filter filter) {
  at::Tensor img = img_in.contiguous();
  Shape s = shape_of(img);
  if (out_h <= 0 || out_w <= 0) throw Error("resize", "empty output size");
  const uint8_t* src = img.data_ptr<uint8_t>();
  at::Tensor out = alloc_like(img, out_h, out_w);
  uint8_t* dst = out.data_ptr<uint8_t>();
  const int64_t c = s.c;
  if (filter == Filter::Nearest) {
    std::vector<int64_t> xs(out_w), ys(out_h);
    for (int64_t x = 0; x < out_w; ++x)
      xs[x] = std::min<int64_t>(static_cast<int64_t>((x + 0.5) * s.w / out_w), s.w - 1);
    for (int64_t y = 0; y < out_h; ++y)
      ys[y] = std::min<int64_t>(static_cast<int64_t>((y + 0.5) * s.h / out_h), s.h - 1);
    for (int64_t y = 0; y < out_h; ++y)
      for (int64_t x = 0; x < out_w; ++x)
        for (int64_t k = 0; k < c; ++k) dst[(y * out_w + x) * c + k] = src[(ys[y] * s.w + xs[x]) * c + k];
    return out;
  }
  // Horizontal pass into float, then vertical pass with rounding.
  Taps tx = make_taps(s.w, out_w, filter), ty = make_taps(s.h, out_h, filter);
  std::vector<float> mid(static_cast<size_t>(s.h * out_w * c));
  for (int64_t y = 0; y < s.h; ++y) {
    const uint8_t* row = src + y * s.w * c;
    float* mrow = mid.data() + y * out_w * c;
    for (int64_t x = 0; x < out_w; ++x) {
      const double* w = &tx.weight[static_cast<size_t>(x * tx.max_taps)];
      for (int64_t k = 0; k < c; ++k) {
        double acc = 0;
        for (int64_t j = 0; j < tx.count[x]; ++j) acc += w[j] * row[(tx.first[x] + j) * c + k];
        mrow[x * c + k] = static_cast<float>(acc);
      }
    }
  }
  std::vector<double> acc(static_cast<size_t>(out_w * c));
  for (int64_t y = 0; y < out_h; ++y) {
    std::fill(acc.begin(), acc.end(), 0.0);
    const double* w = &ty.weight[static_cast<size_t>(y * ty.max_taps)];
    for (int64_t j = 0; j < ty.count[y]; ++j) {
      const float* mrow = mid.data() + (ty.first[y] + j) * out_w * c;
      for (int64_t i = 0; i < out_w * c; ++i) acc[i] += w[j] * mrow[i];
    }
    uint8_t* orow = dst + y * out_w * c;
    for (int64_t i = 0; i < out_w * c; ++i) orow[i] = to_u8(acc[i]);
  }
  return out;
}

at::Tensor rotate_nearest(const at::Tensor& img_in, double degrees, uint8_t fill) {
  at::Tensor img = img_in.contiguous();
  Shape s = shape_of(img);
  at::Tensor out = alloc_like(img, s.h, s.w);
  const uint8_t* src = img.data_ptr<uint8_t>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  double th = degrees * M_PI / 180.0, cs = std::cos(th), sn = std::sin(th);
  double cx = s.w / 2.0, cy = s.h / 2.0;
  for (int64_t y = 0; y < s.h; ++y) {
    for (int64_t x = 0; x < s.w; ++x) {
      // Output offset (px, py) came from input offset R(-θ)(px, py) (CCW on screen, y down).
      double px = x + 0.5 - cx, py = y + 0.5 - cy;
      double u = px * cs - py * sn + cx, v = px * sn + py * cs + cy;
      int64_t ix = static_cast<int64_t>(std::floor(u)), iy = static_cast<int64_t>(std::floor(v));
      uint8_t* o = dst + (y * s.w + x) * s.c;
      if (ix >= 0 && ix < s.w && iy >= 0 && iy < s.h)
        std::memcpy(o, src + (iy * s.w + ix) * s.c, static_cast<size_t>(s.c));
      else
        std::memset(o, fill, static_cast<size_t>(s.c));
    }
  }
  return out;
}

at::Tensor rotate_quarter(const at::Tensor& img_in, int quarter_turns, uint8_t fill) {
  at::Tensor img = img_in.contiguous();
  Shape s = shape_of(img);
  int q = ((quarter_turns % 4) + 4) % 4;
  if (q == 0) return img.clone();
  if (q == 2) return img.flip({0, 1}).contiguous();
  // q == 1 (CCW): r[i][j] = img[j][W-1-i]; q == 3 (CW): r[i][j] = img[H-1-j][i]. r is (W, H).
  at::Tensor r = q == 1 ? img.transpose(0, 1).flip({0}) : img.transpose(0, 1).flip({1});
  r = r.contiguous();
  at::Tensor out = alloc_like(img, s.h, s.w);
  out.fill_(fill);
  auto floor_half = [](int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); };
  paste(r, out, floor_half(s.h - s.w), floor_half(s.w - s.h));
  return out;
}

at::Tensor flip_horizontal(const at::Tensor& img) { return img.flip({1}).contiguous(); }
at::Tensor flip_vertical(const at::Tensor& img) { return img.flip({0}).contiguous(); }

namespace {
int luma(const uint8_t* p) { return (19595 * p[0] + 38470 * p[1] + 7471 * p[2] + 32768) >> 16; }

void check_rgb(const at::Tensor& rgb, const char* op) {
  if (rgb.scalar_type() != at::kByte || rgb.dim() != 3 || rgb.size(2) != 3)
    throw Error(op, "expected uint8 (H, W, 3)");
}
}  // namespace

at::Tensor adjust_brightness(const at::Tensor& rgb_in, double factor) {
  check_rgb(rgb_in, "brightness");
  at::Tensor rgb = rgb_in.contiguous(), out = at::empty_like(rgb);
  const uint8_t* s = rgb.data_ptr<uint8_t>();
  uint8_t* d = out.data_ptr<uint8_t>();
  for (int64_t i = 0, n = rgb.numel(); i < n; ++i) d[i] = to_u8(factor * s[i]);
  return out;
}

at::Tensor adjust_contrast(const at::Tensor& rgb_in, double factor) {
  check_rgb(rgb_in, "contrast");
  at::Tensor rgb = rgb_in.contiguous(), out = at::empty_like(rgb);
  const uint8_t* s = rgb.data_ptr<uint8_t>();
  uint8_t* d = out.data_ptr<uint8_t>();
  int64_t pixels = rgb.size(0) * rgb.size(1);
  double sum = 0;
  for (int64_t i = 0; i < pixels; ++i) sum += luma(s + 3 * i);
  double mean = std::floor(sum / std::max<int64_t>(pixels, 1) + 0.5);
  for (int64_t i = 0, n = rgb.numel(); i < n; ++i) d[i] = to_u8(mean + factor * (s[i] - mean));
  return out;
}

at::Tensor adjust_saturation(const at::Tensor& rgb_in, double factor) {
  check_rgb(rgb_in, "saturation");
  at::Tensor rgb = rgb_in.contiguous(), out = at::empty_like(rgb);
  const uint8_t* s = rgb.data_ptr<uint8_t>();
  uint8_t* d = out.data_ptr<uint8_t>();
  int64_t pixels = rgb.size(0) * rgb.size(1);
  for (int64_t i = 0; i < pixels; ++i) {
    double l = luma(s + 3 * i);
    for (int k = 0; k < 3; ++k) d[3 * i + k] = to_u8(l + factor * (s[3 * i + k] - l));
  }
  return out;
}

at::Tensor gaussian_blur(const at::Tensor& img_in, int k, double sigma) {
  at::Tensor img = img_in.contiguous();
  Shape s = shape_of(img);
  if (k < 1 || k % 2 == 0 || sigma <= 0) throw Error("gaussian_blur", "kernel size must be odd and sigma > 0");
  std::vector<double> w(k);
  double sum = 0;
  for (int i = 0; i < k; ++i) {
    double x = i - (k - 1) / 2.0;
    sum += (w[i] = std::exp(-0.5 * (x / sigma) * (x / sigma)));
  }
  for (auto& v : w) v /= sum;
  const int r = (k - 1) / 2;
  const uint8_t* src = img.data_ptr<uint8_t>();
  std::vector<float> mid(static_cast<size_t>(s.h * s.w * s.c));
  for (int64_t y = 0; y < s.h; ++y)
    for (int64_t x = 0; x < s.w; ++x)
      for (int64_t c = 0; c < s.c; ++c) {
        double acc = 0;
        for (int i = 0; i < k; ++i) acc += w[i] * src[(y * s.w + reflect(x + i - r, s.w)) * s.c + c];
        mid[(y * s.w + x) * s.c + c] = static_cast<float>(acc);
      }
  at::Tensor out = alloc_like(img, s.h, s.w);
  uint8_t* dst = out.data_ptr<uint8_t>();
  for (int64_t y = 0; y < s.h; ++y)
    for (int64_t x = 0; x < s.w; ++x)
      for (int64_t c = 0; c < s.c; ++c) {
        double acc = 0;
        for (int i = 0; i < k; ++i) acc += w[i] * mid[(reflect(y + i - r, s.h) * s.w + x) * s.c + c];
        dst[(y * s.w + x) * s.c + c] = to_u8(acc);
      }
  return out;
}

std::array<double, 9> homography_from_points(const std::array<std::array<double, 2>, 4>& src,
                                             const std::array<std::array<double, 2>, 4>& dst) {
  // Solve the 8x8 system for h0..h7 (h8 = 1) by Gaussian elimination with partial pivoting.
  double a[8][9];
  for (int i = 0; i < 4; ++i) {
    double x = src[i][0], y = src[i][1], u = dst[i][0], v = dst[i][1];
    double r0[9] = {x, y, 1, 0, 0, 0, -x * u, -y * u, u};
    double r1[9] = {0, 0, 0, x, y, 1, -x * v, -y * v, v};
    std::memcpy(a[2 * i], r0, sizeof r0);
    std::memcpy(a[2 * i + 1], r1, sizeof r1);
  }
  for (int col = 0; col < 8; ++col) {
    int piv = col;
    for (int r = col + 1; r < 8; ++r)
      if (std::fabs(a[r][col]) > std::fabs(a[piv][col])) piv = r;
    if (std::fabs(a[piv][col]) < 1e-12) throw Error("homography", "degenerate point configuration");
    if (piv != col)
      for (int j = 0; j < 9; ++j) std::swap(a[piv][j], a[col][j]);
    for (int r = 0; r < 8; ++r) {
      if (r == col) continue;
      double f = a[r][col] / a[col][col];
      for (int j = col; j < 9; ++j) a[r][j] -= f * a[col][j];
    }
  }
  std::array<double, 9> h{};
  for (int i = 0; i < 8; ++i) h[i] = a[i][8] / a[i][i];
  h[8] = 1.0;
  return h;
}

at::Tensor warp_perspective(const at::Tensor& img_in, const std::array<double, 9>& m) {
  at::Tensor img = img_in.contiguous();
  Shape s = shape_of(img);
  // Inverse of m by the adjugate.
  double det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
               m[2] * (m[3] * m[7] - m[4] * m[6]);
  if (std::fabs(det) < 1e-15) throw Error("warp_perspective", "singular homography");
  double inv[9] = {(m[4] * m[8] - m[5] * m[7]) / det, (m[2] * m[7] - m[1] * m[8]) / det,
                   (m[1] * m[5] - m[2] * m[4]) / det, (m[5] * m[6] - m[3] * m[8]) / det,
                   (m[0] * m[8] - m[2] * m[6]) / det, (m[2] * m[3] - m[0] * m[5]) / det,
                   (m[3] * m[7] - m[4] * m[6]) / det, (m[1] * m[6] - m[0] * m[7]) / det,
                   (m[0] * m[4] - m[1] * m[3]) / det};
  at::Tensor out = alloc_like(img, s.h, s.w, at::kFloat);
  const uint8_t* src = img.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  for (int64_t y = 0; y < s.h; ++y) {
    for (int64_t x = 0; x < s.w; ++x) {
      double wz = inv[6] * x + inv[7] * y + inv[8];
      float* o = dst + (y * s.w + x) * s.c;
      for (int64_t c = 0; c < s.c; ++c) o[c] = 0.f;
      if (std::fabs(wz) < 1e-12) continue;
      double sx = (inv[0] * x + inv[1] * y + inv[2]) / wz, sy = (inv[3] * x + inv[4] * y + inv[5]) / wz;
      if (!(sx > -1.0 && sx < s.w && sy > -1.0 && sy < s.h)) continue;
      int64_t x0 = static_cast<int64_t>(std::floor(sx)), y0 = static_cast<int64_t>(std::floor(sy));
      double fx = sx - x0, fy = sy - y0;
      const double wts[4] = {(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy};
      const int64_t xs[4] = {x0, x0 + 1, x0, x0 + 1}, ys[4] = {y0, y0, y0 + 1, y0 + 1};
      for (int t = 0; t < 4; ++t) {
        if (xs[t] < 0 || xs[t] >= s.w || ys[t] < 0 || ys[t] >= s.h) continue;
        const uint8_t* p = src + (ys[t] * s.w + xs[t]) * s.c;
        for (int64_t c = 0; c < s.c; ++c) o[c] += static_cast<float>(wts[t] * p[c]);
      }
    }
  }
  return out;
}

at::Tensor pad_to(const at::Tensor& img, int64_t h, int64_t w, int64_t top, int64_t left, uint8_t fill) {
  at::Tensor src = img.contiguous();
  at::Tensor out = alloc_like(src, h, w);
  out.fill_(fill);
  paste(src, out, top, left);
  return out;
}

at::Tensor crop(const at::Tensor& img, int64_t y, int64_t x, int64_t h, int64_t w) {
  return img.slice(0, y, y + h).slice(1, x, x + w).contiguous();
}

}  // namespace diffnet::data
