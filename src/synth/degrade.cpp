#include "synth/degrade.h"

#include <cmath>

#include "diffnet/image_io.h"

namespace diffnet::synth {

nlohmann::json PrintScan::to_json() const {
  return {{"angle_deg", angle_deg}, {"blur_sigma", blur_sigma}, {"noise_sd", noise_sd}, {"fade", fade},
          {"tint", tint}};
}

PrintScan sample_print_scan(Rng& r) {
  PrintScan p;
  p.angle_deg = r.bernoulli(0.7) ? r.uniform(-0.6, 0.6) : 0.0;
  p.blur_sigma = r.uniform(0.3, 0.9);
  p.noise_sd = r.uniform(0.8, 4.0);
  p.fade = r.uniform(0.78, 1.0);
  if (r.bernoulli(0.6)) p.tint = {r.uniform(242, 255), r.uniform(238, 253), r.uniform(222, 250)};
  return p;
}

void apply_print_scan(Page& page, const PrintScan& ps, Rng& rng) {
  Raster& img = page.img;
  // Tint and fade in one pass (paper white 255 -> tint; ink pulled towards the paper).
  for (size_t i = 0; i < img.data.size(); ++i) {
    int k = static_cast<int>(i % 3);
    double v = img.data[i];
    v = 255.0 - (255.0 - v) * ps.fade;
    img.data[i] = to_u8(v * ps.tint[k] / 255.0);
  }
  if (ps.angle_deg != 0) {
    img = rotate(img, ps.angle_deg, ps.tint);
    for (auto& w : page.words) {
      double xs[4] = {double(w.box.x0), double(w.box.x1), double(w.box.x0), double(w.box.x1)};
      double ys[4] = {double(w.box.y0), double(w.box.y0), double(w.box.y1), double(w.box.y1)};
      double x0 = 1e30, y0 = 1e30, x1 = -1e30, y1 = -1e30;
      for (int c = 0; c < 4; ++c) {
        double ox, oy;
        rotate_point(ps.angle_deg, img.w, img.h, xs[c], ys[c], &ox, &oy);
        x0 = std::min(x0, ox), y0 = std::min(y0, oy), x1 = std::max(x1, ox), y1 = std::max(y1, oy);
      }
      w.box = Box{int(std::floor(x0)), int(std::floor(y0)), int(std::ceil(x1)), int(std::ceil(y1))}.clip(img.w, img.h);
      double ox, oy;
      rotate_point(ps.angle_deg, img.w, img.h, w.style.origin_x, w.style.baseline_y, &ox, &oy);
      w.style.origin_x = ox, w.style.baseline_y = oy;
    }
    std::vector<Word> kept;
    for (auto& w : page.words)
      if (!w.box.empty()) kept.push_back(std::move(w));
    page.words = std::move(kept);
  }
  if (ps.blur_sigma > 0) img = gaussian_blur(img, ps.blur_sigma);
  if (ps.noise_sd > 0) {
    const auto& table = normal_table();
    const size_t n = size_t(img.w) * img.h;
    for (size_t i = 0; i < n; ++i) {
      uint64_t bits = rng.next_u64();
      double nz = ps.noise_sd * table[bits >> 48];
      double chroma = 0.3 * ps.noise_sd * table[(bits >> 16) & 0xFFFF];
      uint8_t* p = &img.data[i * 3];
      p[0] = to_u8(p[0] + nz + chroma);
      p[1] = to_u8(p[1] + nz);
      p[2] = to_u8(p[2] + nz - chroma);
    }
  }
  page.degraded = true;
}

void jpeg_round_trip(Page& page, int quality) {
  auto bytes = encode_jpeg(to_tensor(page.img), quality);
  page.img = from_tensor(decode_image_bytes(bytes, "jpeg round trip"));
  page.degraded = true;
}

void scale_page(Page& page, double s) {
  int w = std::max(1, static_cast<int>(std::lround(page.img.w * s)));
  int h = std::max(1, static_cast<int>(std::lround(page.img.h * s)));
  double sx = double(w) / page.img.w, sy = double(h) / page.img.h;
  page.img = s < 1 ? resize_area(page.img, w, h) : resize_bilinear(page.img, w, h);
  std::vector<Word> kept;
  for (auto& wd : page.words) {
    Word n = wd;
    n.box = Box{int(std::floor(wd.box.x0 * sx)), int(std::floor(wd.box.y0 * sy)), int(std::ceil(wd.box.x1 * sx)),
                int(std::ceil(wd.box.y1 * sy))}.clip(w, h);
    n.style.origin_x *= sx, n.style.baseline_y *= sy, n.style.size_px *= sy;
    if (!n.box.empty()) kept.push_back(std::move(n));
  }
  page.words = std::move(kept);
}

void crop_page(Page& page, const Box& b0) {
  Box b = b0.clip(page.img.w, page.img.h);
  page.img = crop(page.img, b);
  std::vector<Word> kept;
  for (auto& wd : page.words) {
    if (!b.contains(wd.box)) continue;
    Word n = wd;
    n.box = wd.box.shift(-b.x0, -b.y0);
    n.style.origin_x -= b.x0, n.style.baseline_y -= b.y0;
    kept.push_back(std::move(n));
  }
  page.words = std::move(kept);
}

}  // namespace diffnet::synth
