#include "synth/raster.h"

#include <cmath>

#include "diffnet/common.h"

namespace diffnet::synth {

at::Tensor to_tensor(const Raster& r) {
  if (r.c == 1) {
    auto t = at::empty({r.h, r.w}, at::kByte);
    std::copy(r.data.begin(), r.data.end(), t.data_ptr<uint8_t>());
    return t;
  }
  auto t = at::empty({r.h, r.w, r.c}, at::kByte);
  std::copy(r.data.begin(), r.data.end(), t.data_ptr<uint8_t>());
  return t;
}

Raster from_tensor(const at::Tensor& t0) {
  at::Tensor t = t0.to(at::kByte).contiguous();
  if (t.dim() == 2) t = t.unsqueeze(2);
  if (t.dim() != 3 || (t.size(2) != 1 && t.size(2) != 3))
    throw Error("synth", "expected an (H, W, 3) or (H, W) uint8 image");
  Raster r(static_cast<int>(t.size(1)), static_cast<int>(t.size(0)), static_cast<int>(t.size(2)));
  std::copy(t.data_ptr<uint8_t>(), t.data_ptr<uint8_t>() + r.data.size(), r.data.begin());
  return r;
}

Raster crop(const Raster& r, const Box& b0) {
  Box b = b0.clip(r.w, r.h);
  if (b.empty()) return Raster(0, 0, r.c);
  Raster out(b.w(), b.h(), r.c);
  for (int y = 0; y < b.h(); ++y)
    std::copy(r.px(b.x0, b.y0 + y), r.px(b.x0, b.y0 + y) + size_t(b.w()) * r.c, out.px(0, y));
  return out;
}

void paste(Raster& dst, const Raster& src, int x, int y) {
  Box b = Box{x, y, x + src.w, y + src.h}.clip(dst.w, dst.h);
  if (b.empty()) return;
  for (int yy = b.y0; yy < b.y1; ++yy)
    std::copy(src.px(b.x0 - x, yy - y), src.px(b.x0 - x, yy - y) + size_t(b.w()) * src.c, dst.px(b.x0, yy));
}

namespace {
struct Tap {
  int i0, i1;
  float f;
};
std::vector<Tap> linear_taps(int src, int dst) {
  std::vector<Tap> taps(dst);
  double scale = double(src) / dst;
  for (int i = 0; i < dst; ++i) {
    double s = (i + 0.5) * scale - 0.5;
    if (s < 0) s = 0;
    int i0 = static_cast<int>(std::floor(s));
    if (i0 > src - 1) i0 = src - 1;
    int i1 = std::min(i0 + 1, src - 1);
    taps[i] = {i0, i1, static_cast<float>(s - i0)};
  }
  return taps;
}
}  // namespace

Raster resize_bilinear(const Raster& src, int w, int h) {
  Raster out(w, h, src.c);
  if (src.empty() || w <= 0 || h <= 0) return out;
  auto tx = linear_taps(src.w, w), ty = linear_taps(src.h, h);
  const int c = src.c;
  for (int y = 0; y < h; ++y) {
    const Tap& ry = ty[y];
    for (int x = 0; x < w; ++x) {
      const Tap& rx = tx[x];
      const uint8_t* a = src.px(rx.i0, ry.i0);
      const uint8_t* b = src.px(rx.i1, ry.i0);
      const uint8_t* cc = src.px(rx.i0, ry.i1);
      const uint8_t* d = src.px(rx.i1, ry.i1);
      uint8_t* o = out.px(x, y);
      for (int k = 0; k < c; ++k) {
        float top = a[k] + (b[k] - a[k]) * rx.f;
        float bot = cc[k] + (d[k] - cc[k]) * rx.f;
        o[k] = to_u8(top + (bot - top) * ry.f);
      }
    }
  }
  return out;
}

Raster resize_area(const Raster& src, int w, int h) {
  Raster out(w, h, src.c);
  if (src.empty() || w <= 0 || h <= 0) return out;
  const int c = src.c;
  // Horizontal pass into floats, then vertical: exact box-footprint weights.
  auto weights = [](int n_src, int n_dst) {
    std::vector<std::vector<std::pair<int, double>>> wt(n_dst);
    double scale = double(n_src) / n_dst;
    for (int i = 0; i < n_dst; ++i) {
      double a = i * scale, b = (i + 1) * scale;
      for (int j = static_cast<int>(std::floor(a)); j < std::min(n_src, static_cast<int>(std::ceil(b))); ++j) {
        double ov = std::min(b, j + 1.0) - std::max(a, double(j));
        if (ov > 0) wt[i].push_back({j, ov / scale});
      }
    }
    return wt;
  };
  auto wx = weights(src.w, w), wy = weights(src.h, h);
  std::vector<float> tmp(size_t(src.h) * w * c);
  for (int y = 0; y < src.h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) {
        double s = 0;
        for (auto& p : wx[x]) s += p.second * src.px(p.first, y)[k];
        tmp[(size_t(y) * w + x) * c + k] = static_cast<float>(s);
      }
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) {
        double s = 0;
        for (auto& p : wy[y]) s += p.second * tmp[(size_t(p.first) * w + x) * c + k];
        out.px(x, y)[k] = to_u8(s);
      }
  return out;
}

Raster gaussian_blur(const Raster& src, double sigma) {
  if (!(sigma > 0) || src.empty()) return src;
  int r = static_cast<int>(std::ceil(3 * sigma));
  std::vector<float> k(2 * r + 1);
  double sum = 0;
  for (int i = -r; i <= r; ++i) sum += (k[i + r] = static_cast<float>(std::exp(-0.5 * i * i / (sigma * sigma))));
  for (auto& v : k) v = static_cast<float>(v / sum);
  const int c = src.c, W = src.w, H = src.h;
  std::vector<float> tmp(src.data.size());
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x)
      for (int ch = 0; ch < c; ++ch) {
        float s = 0;
        for (int i = -r; i <= r; ++i) {
          int xx = std::min(std::max(x + i, 0), W - 1);
          s += k[i + r] * src.data[(size_t(y) * W + xx) * c + ch];
        }
        tmp[(size_t(y) * W + x) * c + ch] = s;
      }
  Raster out(W, H, c);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x)
      for (int ch = 0; ch < c; ++ch) {
        float s = 0;
        for (int i = -r; i <= r; ++i) {
          int yy = std::min(std::max(y + i, 0), H - 1);
          s += k[i + r] * tmp[(size_t(yy) * W + x) * c + ch];
        }
        out.data[(size_t(y) * W + x) * c + ch] = to_u8(s);
      }
  return out;
}

void rotate_point(double angle_deg, int w, int h, double x, double y, double* ox, double* oy) {
  double a = angle_deg * M_PI / 180.0, ca = std::cos(a), sa = std::sin(a);
  double cx = w / 2.0, cy = h / 2.0;
  double dx = x - cx, dy = y - cy;
  *ox = cx + ca * dx - sa * dy;
  *oy = cy + sa * dx + ca * dy;
}

Raster rotate(const Raster& src, double angle_deg, const Color& fill) {
  const int W = src.w, H = src.h, c = src.c;
  Raster out(W, H, c);
  double a = angle_deg * M_PI / 180.0, ca = std::cos(a), sa = std::sin(a);
  double cx = W / 2.0, cy = H / 2.0;
  for (int y = 0; y < H; ++y) {
    for (int x = 0; x < W; ++x) {
      // Inverse map the output pixel centre to the source.
      double dx = x + 0.5 - cx, dy = y + 0.5 - cy;
      double sx = cx + ca * dx + sa * dy - 0.5, sy = cy - sa * dx + ca * dy - 0.5;
      int x0 = static_cast<int>(std::floor(sx)), y0 = static_cast<int>(std::floor(sy));
      float fx = static_cast<float>(sx - x0), fy = static_cast<float>(sy - y0);
      uint8_t* o = out.px(x, y);
      for (int k = 0; k < c; ++k) {
        auto get = [&](int xx, int yy) -> float {
          if (xx < 0 || yy < 0 || xx >= W || yy >= H) return static_cast<float>(fill[k]);
          return src.data[(size_t(yy) * W + xx) * c + k];
        };
        float top = get(x0, y0) + (get(x0 + 1, y0) - get(x0, y0)) * fx;
        float bot = get(x0, y0 + 1) + (get(x0 + 1, y0 + 1) - get(x0, y0 + 1)) * fx;
        o[k] = to_u8(top + (bot - top) * fy);
      }
    }
  }
  return out;
}

Raster luma(const Raster& rgb) {
  Raster g(rgb.w, rgb.h, 1);
  if (rgb.c == 1) return rgb;
  const size_t n = size_t(rgb.w) * rgb.h;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = &rgb.data[i * 3];
    g.data[i] = static_cast<uint8_t>((19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 32768u) >> 16);
  }
  return g;
}

int otsu_threshold(const Raster& gray, const Box& b0) {
  Box b = b0.clip(gray.w, gray.h);
  std::array<double, 256> hist{};
  double n = 0;
  for (int y = b.y0; y < b.y1; ++y)
    for (int x = b.x0; x < b.x1; ++x) hist[*gray.px(x, y)] += 1, n += 1;
  if (n == 0) return 127;
  double total = 0;
  for (int i = 0; i < 256; ++i) total += i * hist[i];
  double w0 = 0, sum0 = 0, best = -1;
  int t = 127;
  for (int i = 0; i < 256; ++i) {
    w0 += hist[i];
    if (w0 == 0) continue;
    double w1 = n - w0;
    if (w1 == 0) break;
    sum0 += i * hist[i];
    double m0 = sum0 / w0, m1 = (total - sum0) / w1;
    double between = w0 * w1 * (m0 - m1) * (m0 - m1);
    if (between > best) best = between, t = i;
  }
  return t;
}

Color mean_color(const Raster& rgb, const Raster& gray, const Box& b0, int t, bool ink, const Color& fallback) {
  Box b = b0.clip(rgb.w, rgb.h);
  Color s{0, 0, 0};
  double n = 0;
  for (int y = b.y0; y < b.y1; ++y)
    for (int x = b.x0; x < b.x1; ++x) {
      bool is_ink = *gray.px(x, y) <= t;
      if (is_ink != ink) continue;
      const uint8_t* p = rgb.px(x, y);
      for (int k = 0; k < 3; ++k) s[k] += p[k];
      n += 1;
    }
  if (n == 0) return fallback;
  for (auto& v : s) v /= n;
  return s;
}

void luma_stats(const Raster& gray, const Box& b0, double* mean, double* sd) {
  Box b = b0.clip(gray.w, gray.h);
  double s = 0, s2 = 0, n = 0;
  for (int y = b.y0; y < b.y1; ++y)
    for (int x = b.x0; x < b.x1; ++x) {
      double v = *gray.px(x, y);
      s += v, s2 += v * v, n += 1;
    }
  if (n == 0) {
    *mean = 255, *sd = 0;
    return;
  }
  *mean = s / n;
  *sd = std::sqrt(std::max(0.0, s2 / n - *mean * *mean));
}

void ring_stats(const Raster& gray, const Box& b, int width, double* mean, double* sd) {
  Box outer = b.expand(width).clip(gray.w, gray.h);
  double s = 0, s2 = 0, n = 0;
  for (int y = outer.y0; y < outer.y1; ++y)
    for (int x = outer.x0; x < outer.x1; ++x) {
      if (x >= b.x0 && x < b.x1 && y >= b.y0 && y < b.y1) continue;
      double v = *gray.px(x, y);
      s += v, s2 += v * v, n += 1;
    }
  if (n == 0) {
    *mean = 255, *sd = 0;
    return;
  }
  *mean = s / n;
  *sd = std::sqrt(std::max(0.0, s2 / n - *mean * *mean));
}

const std::vector<float>& normal_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (int i = 0; i < 65536; ++i) {
      double p = (i + 0.5) / 65536.0;
      // Solve Phi(x) = p by Newton steps on erf (Phi(x) = (1 + erf(x / sqrt 2)) / 2).
      double x = 0;
      for (int it = 0; it < 60; ++it) {
        double f = 0.5 * (1 + std::erf(x / std::sqrt(2.0))) - p;
        double d = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
        double step = f / std::max(d, 1e-300);
        if (step > 2) step = 2;
        if (step < -2) step = -2;
        x -= step;
        if (std::fabs(step) < 1e-12) break;
      }
      t[i] = static_cast<float>(x);
    }
    return t;
  }();
  return table;
}

}  // namespace diffnet::synth
