// One training sample: first crop, augmentation, crop/pad to R, homography, JPEG passes, DCT
// (docs/design.md §4.2; crop and pad offsets are multiples of 8, §3.3).
#include <algorithm>
#include <cmath>
#include <vector>

#include "data/image_ops.h"
#include "common/json_fields.h"
#include "diffnet/common.h"
#include "diffnet/data.h"
#include "diffnet/dct.h"
#include "diffnet/image_io.h"

namespace diffnet {
namespace {

int64_t floor8(int64_t v) { return v / 8 * 8; }

// Visits every AugmentConfig field with its JSON name.
template <class C, class F>
void visit_fields(C& c, F&& f) {
  f("enabled", c.enabled);
  f("prob_disable", c.prob_disable);
  f("p_spatial", c.p_spatial);
  f("p_visual", c.p_visual);
  f("p_flip", c.p_flip);
  f("p_homography", c.p_homography);
  f("small_angle", c.small_angle);
  f("p_jpeg_zero", c.p_jpeg_zero);
  f("p_jpeg_one", c.p_jpeg_one);
  f("jpeg_max_passes", c.jpeg_max_passes);
  f("quality_min", c.quality_min);
  f("quality_max", c.quality_max);
  f("tamper_aware_crop", c.tamper_aware_crop);
  f("p_uniform_crop", c.p_uniform_crop);
  f("crop_tries", c.crop_tries);
  f("crop_min_positive", c.crop_min_positive);
  f("dct_from_file", c.dct_from_file);
}

// Rescale, small rotation, colour, blur, flip, harsh rotation: each drawn independently, in this order.
void augment(at::Tensor& rgb, at::Tensor& mask, const AugmentConfig& cfg, Rng& rng, std::vector<std::string>& ops) {
  using namespace data;
  // Pre-drawn per sample (TDoc draws them before the ops).
  int64_t angle = rng.randint(-cfg.small_angle, cfg.small_angle);
  int64_t harsh = rng.randint(0, 2);  // +90, -90, 180
  int64_t flip = rng.randint(0, 1);   // horizontal, vertical

  if (rng.bernoulli(cfg.p_spatial)) {
    double s = 0.5 + 0.5 * rng.uniform();
    if (rng.bernoulli(0.5)) s = 1.0 / s;
    static const Filter filters[3] = {Filter::Bilinear, Filter::Bicubic, Filter::Lanczos};
    Filter f = filters[rng.randint(0, 2)];
    int64_t nh = std::max<int64_t>(8, static_cast<int64_t>(rgb.size(0) * s));
    int64_t nw = std::max<int64_t>(8, static_cast<int64_t>(rgb.size(1) * s));
    rgb = resize(rgb, nh, nw, f);
    mask = resize(mask, nh, nw, Filter::Nearest);
    ops.push_back("rescale");
  }
  if (rng.bernoulli(cfg.p_spatial)) {
    rgb = rotate_nearest(rgb, static_cast<double>(angle), 255);
    mask = rotate_nearest(mask, static_cast<double>(angle), 0);
    ops.push_back("rotate");
  }
  if (rng.bernoulli(cfg.p_visual)) {
    rgb = adjust_brightness(rgb, rng.uniform(0.3, 2.0));
    ops.push_back("brightness");
  }
  if (rng.bernoulli(cfg.p_visual)) {
    rgb = adjust_contrast(rgb, rng.uniform(0.3, 2.0));
    ops.push_back("contrast");
  }
  if (rng.bernoulli(cfg.p_visual)) {
    rgb = adjust_saturation(rgb, rng.uniform(0.3, 2.0));
    ops.push_back("saturation");
  }
  if (rng.bernoulli(cfg.p_visual)) {
    int k = 3 + 2 * static_cast<int>(rng.randint(0, 2));
    rgb = gaussian_blur(rgb, k, 0.15 * k + 0.35);
    ops.push_back("blur");
  }
  if (rng.bernoulli(cfg.p_flip)) {
    rgb = flip ? flip_vertical(rgb) : flip_horizontal(rgb);
    mask = flip ? flip_vertical(mask) : flip_horizontal(mask);
    ops.push_back(flip ? "vflip" : "hflip");
  }
  if (rng.bernoulli(cfg.p_flip)) {
    int q = harsh == 0 ? 1 : (harsh == 1 ? 3 : 2);
    rgb = rotate_quarter(rgb, q, 255);
    mask = rotate_quarter(mask, q, 0);
    ops.push_back("rot" + std::to_string(q * 90));
  }
}

// TDoc's homography (after the crop), for a square R x R sample. The corner offsets are TDoc's pixel
// values at R >= 512 and scale with R/512 below so small crops are not folded over.
void homography(at::Tensor& rgb, at::Tensor& mask, Rng& rng) {
  const double r = static_cast<double>(rgb.size(0));
  const double f = std::min(1.0, r / 512.0);
  auto off = [&](int64_t lo, int64_t hi) { return f * static_cast<double>(rng.randint(lo, hi)); };
  std::array<std::array<double, 2>, 4> src{{{0, 0}, {0, r}, {r, r}, {r, 0}}};
  double a = off(50, 100), b = off(100, 150), c = off(0, 100), d = off(0, 100);
  std::array<std::array<double, 2>, 4> dst{{{a, b}, {0, r}, {r, r - c}, {r - d, 0}}};
  auto h = data::homography_from_points(src, dst);
  rgb = data::warp_perspective(rgb, h).round().clamp(0, 255).to(at::kByte).contiguous();
  mask = data::warp_perspective(mask, h).gt(0).to(at::kByte).contiguous();
}

}  // namespace

nlohmann::json to_json(const AugmentConfig& cfg) {
  return fields_to_json(cfg, [](const auto& c, auto&& f) { visit_fields(c, f); });
}

AugmentConfig augment_config_from_json(const nlohmann::json& j) {
  AugmentConfig cfg;
  read_fields(j, cfg, [](auto& c, auto&& f) { visit_fields(c, f); }, "augment config");
  if (cfg.quality_min < 1 || cfg.quality_max > 100 || cfg.quality_min > cfg.quality_max)
    throw Error("augment config", "quality range must be within 1..100");
  if (cfg.jpeg_max_passes < 1) throw Error("augment config", "jpeg_max_passes must be >= 1");
  return cfg;
}

int draw_jpeg_passes(const AugmentConfig& cfg, Rng& rng) {
  if (rng.uniform() < cfg.p_jpeg_zero) return 0;
  if (rng.uniform() < cfg.p_jpeg_one) return 1;
  return static_cast<int>(rng.randint(1, cfg.jpeg_max_passes));
}

std::array<int64_t, 2> choose_crop(const at::Tensor& mask_in, int64_t ch, int64_t cw, const AugmentConfig& cfg,
                                   Rng& rng) {
  at::Tensor mask = mask_in.contiguous();
  const int64_t h = mask.size(0), w = mask.size(1);
  if (ch > h || cw > w || ch <= 0 || cw <= 0) throw Error("crop", "window larger than the image");
  const int64_t ny = (h - ch) / 8, nx = (w - cw) / 8;  // offsets 0, 8, ..., 8*ny
  auto uniform = [&]() -> std::array<int64_t, 2> { return {8 * rng.randint(0, ny), 8 * rng.randint(0, nx)}; };
  bool pick_uniform = rng.uniform() < cfg.p_uniform_crop;
  if (!cfg.tamper_aware_crop || pick_uniform) return uniform();
  const uint8_t* m = mask.data_ptr<uint8_t>();
  // Summed-area table: window counts in O(1).
  std::vector<int64_t> sat(static_cast<size_t>((h + 1) * (w + 1)), 0);
  for (int64_t y = 0; y < h; ++y) {
    int64_t row = 0;
    for (int64_t x = 0; x < w; ++x) {
      row += m[y * w + x] != 0;
      sat[(y + 1) * (w + 1) + x + 1] = sat[y * (w + 1) + x + 1] + row;
    }
  }
  const int64_t total = sat[h * (w + 1) + w];
  if (total == 0) return uniform();
  const int64_t need = std::min(total, cfg.crop_min_positive);
  auto count = [&](int64_t y, int64_t x) {
    return sat[(y + ch) * (w + 1) + x + cw] - sat[y * (w + 1) + x + cw] - sat[(y + ch) * (w + 1) + x] +
           sat[y * (w + 1) + x];
  };
  for (int t = 0; t < cfg.crop_tries; ++t) {
    auto yx = uniform();
    if (count(yx[0], yx[1]) >= need) return yx;
  }
  // Fallback (not in TDoc, which keeps its last failed try): centre an aligned window on a random
  // positive pixel, so tamper-aware crops contain tampered pixels whenever the image has some.
  int64_t k = rng.randint(0, total - 1);
  for (int64_t i = 0; i < h * w; ++i) {
    if (m[i] && k-- == 0) {
      int64_t py = i / w, px = i % w;
      int64_t y = std::clamp<int64_t>(py - ch / 2, 0, h - ch), x = std::clamp<int64_t>(px - cw / 2, 0, w - cw);
      return {std::min(floor8(y), 8 * ny), std::min(floor8(x), 8 * nx)};
    }
  }
  return uniform();
}

TrainSample make_train_sample(const LoadedItem& item, int64_t size, const AugmentConfig& cfg, Rng& rng) {
  if (size <= 0 || size % 8 != 0) throw Error("sample", "crop size must be a positive multiple of 8");
  TrainSample s;
  s.id = item.id;
  at::Tensor rgb = item.rgb.contiguous(), mask = item.mask.contiguous();
  if (rgb.dim() != 3 || rgb.size(2) != 3 || mask.dim() != 2 || mask.size(0) != rgb.size(0) ||
      mask.size(1) != rgb.size(1))
    throw Error(item.id, "image/mask shapes do not match");
  // 1. Load-time crop to at most R x R (TDoc util.py), 8-aligned in the source image.
  int64_t ch = std::min(size, rgb.size(0)), cw = std::min(size, rgb.size(1));
  if (ch < rgb.size(0) || cw < rgb.size(1)) {
    auto yx = choose_crop(mask, ch, cw, cfg, rng);
    s.crop_y = yx[0];
    s.crop_x = yx[1];
    rgb = data::crop(rgb, yx[0], yx[1], ch, cw);
    mask = data::crop(mask, yx[0], yx[1], ch, cw);
  }
  // 2. Per-sample switch-off (fine-tuning), then the augmentation groups.
  bool disabled = rng.uniform() < cfg.prob_disable;
  s.augmented = cfg.enabled && !disabled;
  if (s.augmented) augment(rgb, mask, cfg, rng, s.ops);
  // 3. Crop (tamper-aware) / pad (white, zero mask) to exactly R x R; both offsets multiples of 8.
  if (rgb.size(0) > size || rgb.size(1) > size) {
    int64_t h2 = std::min(size, rgb.size(0)), w2 = std::min(size, rgb.size(1));
    auto yx = choose_crop(mask, h2, w2, cfg, rng);
    rgb = data::crop(rgb, yx[0], yx[1], h2, w2);
    mask = data::crop(mask, yx[0], yx[1], h2, w2);
  }
  const int64_t top = floor8((size - rgb.size(0)) / 2), left = floor8((size - rgb.size(1)) / 2);
  const int64_t content_h = rgb.size(0), content_w = rgb.size(1);
  if (content_h < size || content_w < size) {
    rgb = data::pad_to(rgb, size, size, top, left, 255);
    mask = data::pad_to(mask, size, size, top, left, 0);
  }
  // 4. Homography (after the crop).
  if (s.augmented && rng.bernoulli(cfg.p_homography)) {
    homography(rgb, mask, rng);
    s.ops.push_back("homography");
  }
  // 5. JPEG passes, each at its own quality.
  if (s.augmented) {
    s.jpeg_passes = draw_jpeg_passes(cfg, rng);
    for (int p = 0; p < s.jpeg_passes; ++p) {
      int q = static_cast<int>(rng.randint(cfg.quality_min, cfg.quality_max));
      rgb = decode_image_bytes(encode_jpeg(rgb, q), item.id + " (recompressed)");
      s.last_quality = q;
    }
  }
  // 6. DCT and table.
  if (s.jpeg_passes > 0) {
    s.qt = ijg_luma_table(s.last_quality);
    s.dct = pixel_dct(rgb, s.qt);
  } else if (!s.augmented && item.is_jpeg) {
    JpegCoefficients jc = read_jpeg_coefficients_bytes(item.image_bytes, item.id);
    s.qt = jc.qt;
    // Whole 8x8 blocks of the cropped source region take the file's coefficients; the white padding
    // keeps its pixel DCT. Offsets are multiples of 8, so the file grid lines up with the sample's.
    const int64_t by = content_h / 8 * 8, bx = content_w / 8 * 8;
    const bool from_file = cfg.dct_from_file && by > 0 && bx > 0 && s.crop_y + by <= jc.coef.size(0) &&
                           s.crop_x + bx <= jc.coef.size(1);
    const bool covered = by == size && bx == size;  // no padding: nothing left for the pixel path
    s.dct = from_file && covered ? at::empty({size, size}, at::kByte) : pixel_dct(rgb, s.qt);
    if (from_file) {
      at::Tensor file = clip_coefficients(jc.coef.slice(0, s.crop_y, s.crop_y + by).slice(1, s.crop_x, s.crop_x + bx),
                                          by, bx);
      s.dct.slice(0, top, top + by).slice(1, left, left + bx).copy_(file);
    }
  } else {
    s.qt = ones_table();
    s.dct = pixel_dct(rgb, s.qt);
  }
  s.rgb = rgb.contiguous();
  s.mask = mask.contiguous();
  s.dct = s.dct.to(at::kByte).contiguous();
  s.qt = s.qt.to(at::kLong).contiguous();
  s.label = mask.any().item<bool>() ? 1 : 0;
  return s;
}

}  // namespace diffnet
