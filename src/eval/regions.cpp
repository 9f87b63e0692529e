#include "diffnet/regions.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cmath>
#include <optional>
#include <vector>

#include "diffnet/common.h"
#include "eval/font.h"

namespace diffnet {

at::Tensor prob_to_u8(const at::Tensor& prob) {
  // round() in ATen is half-to-even; floor(x + 0.5) is half-up (x >= 0 here), matching Python's
  // `(p * 255 + 0.5).astype(uint8)` and most tools.
  // In place after the first product: one page-sized float at a time.
  return (prob.to(at::kFloat) * 255.0f).add_(0.5f).floor_().clamp_(0, 255).to(at::kByte);
}

std::vector<Region> find_regions(const at::Tensor& prob, double threshold, int64_t min_area, int64_t gap) {
  if (prob.dim() != 2) throw Error("find_regions", "probability map must be (H, W)");
  if (gap < 0) throw Error("find_regions", "gap must be >= 0");
  at::Tensor p = prob.to(at::kFloat).contiguous();
  const int64_t H = p.size(0), W = p.size(1);
  const float* pp = p.data_ptr<float>();
  const float thr = float(threshold);
  // Each hot pixel (y, x) stands for the box [y, y + gap] x [x, x + gap] (clipped to the map): two hot
  // pixels at most gap + 1 apart (Chebyshev) have boxes that overlap or touch, so the 8-connected
  // components of the union of boxes are the chains of hot pixels with steps of at most gap + 1.
  // The union is a running window maximum along x, then along y.
  std::vector<uint8_t> cover(size_t(H * W), 0);
  for (int64_t y = 0; y < H; ++y) {
    int64_t last = -1 - gap;  // x of the latest hot pixel in this row
    for (int64_t x = 0; x < W; ++x) {
      if (pp[y * W + x] > thr) last = x;
      cover[size_t(y * W + x)] = x - last <= gap;
    }
  }
  if (gap > 0) {
    for (int64_t x = 0; x < W; ++x) {
      int64_t last = -1 - gap;
      for (int64_t y = 0; y < H; ++y) {
        uint8_t& c = cover[size_t(y * W + x)];
        if (c == 1) last = y;
        c = y - last <= gap ? 2 : 0;  // 2: covered after both passes (the row pass's 1s are read first)
      }
    }
  }
  const uint8_t covered = gap > 0 ? 2 : 1;
  // Flood fill (8-connectivity) over the covered pixels; the statistics count hot pixels only.
  std::vector<uint8_t> seen(size_t(H * W), 0);
  std::vector<int64_t> stack;
  std::vector<Region> regions;
  for (int64_t start = 0; start < H * W; ++start) {
    if (seen[start] || !(pp[start] > thr)) continue;
    Region r;
    int64_t x0 = W, y0 = H, x1 = -1, y1 = -1;
    double sum = 0, peak = 0;
    seen[start] = 1;
    stack.assign(1, start);
    while (!stack.empty()) {
      int64_t i = stack.back();
      stack.pop_back();
      int64_t y = i / W, x = i % W;
      if (pp[i] > thr) {
        x0 = std::min(x0, x), x1 = std::max(x1, x);
        y0 = std::min(y0, y), y1 = std::max(y1, y);
        ++r.area;
        sum += pp[i];
        peak = std::max(peak, double(pp[i]));
      }
      for (int64_t dy = -1; dy <= 1; ++dy) {
        int64_t ny = y + dy;
        if (ny < 0 || ny >= H) continue;
        for (int64_t dx = -1; dx <= 1; ++dx) {
          int64_t nx = x + dx;
          if (nx < 0 || nx >= W) continue;
          int64_t j = ny * W + nx;
          if (!seen[j] && cover[size_t(j)] == covered) {
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

namespace {
int overlay_text_scale(int64_t H, int64_t W) { return int(std::clamp<int64_t>(std::min(H, W) / 500, 1, 6)); }

// Heat colour at p (floor <= p <= 1): amber (255, 190, 0) at the floor to red (225, 0, 0) at 1.
std::array<float, 3> heat_colour(float t) { return {255.0f - 30.0f * t, 190.0f * (1.0f - t), 0.0f}; }
}  // namespace

Rect overlay_legend_rect(int64_t H, int64_t W) {
  const int s = overlay_text_scale(H, W);
  const int64_t w = (30 * font::kAdvance + 8) * s, h = 34 * s;
  if (w + 4 * s > W) return {};
  return {W - w - 2 * s, H + 2 * s, W - 2 * s, H + 2 * s + h};
}

int64_t overlay_legend_strip(int64_t H, int64_t W) {
  const Rect L = overlay_legend_rect(H, W);
  return L.x1 > L.x0 ? L.y1 + 2 * overlay_text_scale(H, W) - H : 0;
}

at::Tensor render_overlay(const at::Tensor& rgb, const at::Tensor& prob, const std::vector<Region>& regions,
                          const OverlayOptions& o) {
  if (rgb.dim() != 3 || rgb.size(2) != 3 || prob.dim() != 2 || rgb.size(0) != prob.size(0) ||
      rgb.size(1) != prob.size(1))
    throw Error("render_overlay", "image (H, W, 3) and probability map (H, W) must match");
  if (!(o.floor >= 0 && o.floor < 1)) throw Error("render_overlay", "floor must be in [0, 1)");
  const int64_t H = rgb.size(0), W = rgb.size(1);
  const float fl = float(o.floor);
  const int64_t strip = o.legend ? overlay_legend_strip(H, W) : 0;
  at::Tensor out = at::full({H + strip, W, 3}, 255, at::kByte);
  out.slice(0, 0, H).copy_(rgb);
  // The colour wash, a band of rows at a time (float copies of a whole page would be 28 bytes a pixel).
  constexpr int64_t kBand = 256;
  for (int64_t y0 = 0; y0 < H; y0 += kBand) {
    const int64_t y1 = std::min(H, y0 + kBand);
    at::Tensor c = rgb.slice(0, y0, y1).to(at::kFloat);
    at::Tensor p = prob.slice(0, y0, y1).to(at::kFloat).clamp(0, 1);
    at::Tensor t = ((p - fl) / (1.0f - fl)).clamp(0, 1);                    // 0 at the floor, 1 at p = 1
    at::Tensor on = (p >= fl).to(at::kFloat);
    at::Tensor alpha = (0.35f + 0.45f * t) * on;                            // 0 below the floor
    at::Tensor heat = at::stack({255.0f - 30.0f * t, 190.0f * (1.0f - t), at::zeros_like(t)}, 2);
    at::Tensor a3 = alpha.unsqueeze(2);
    at::Tensor blended = ((c * (1 - a3) + heat * a3) + 0.5f).floor().clamp(0, 255).to(at::kByte);
    // Below the floor the input's bytes are kept exactly.
    at::Tensor band = out.slice(0, y0, y1);
    band.copy_(at::where(on.unsqueeze(2) > 0, blended, band));
  }
  uint8_t* px = out.data_ptr<uint8_t>();

  const int s = overlay_text_scale(H, W);
  const int64_t thick = std::max<int64_t>(2, std::min(H, W) / 300);
  const std::array<uint8_t, 3> blue{0, 110, 255}, white{255, 255, 255}, black{0, 0, 0};
  std::vector<Rect> tabs;  // labels placed so far: a label never covers another one
  auto overlaps = [&](const Rect& a) {
    return std::any_of(tabs.begin(), tabs.end(),
                       [&](const Rect& b) { return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1; });
  };
  for (const Region& r : regions) {
    // The rectangle is drawn just outside the box so that the region itself stays visible.
    const int64_t bx0 = r.x - thick, by0 = r.y - thick, bx1 = r.x + r.w + thick, by1 = r.y + r.h + thick;
    font::fill_rect(px, H, W, bx0, by0, bx1, r.y, blue);          // top
    font::fill_rect(px, H, W, bx0, r.y + r.h, bx1, by1, blue);    // bottom
    font::fill_rect(px, H, W, bx0, by0, r.x, by1, blue);          // left
    font::fill_rect(px, H, W, r.x + r.w, by0, bx1, by1, blue);    // right
    if (o.labels) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%.2f", r.peak);
      const int64_t tw = font::text_width(buf, s), th = font::kGlyphH * s;
      // Label tab above the box, else below it (no room above, or another label there), white on blue.
      // Regions come largest first, so when both places are taken the smaller region goes unlabelled.
      const int64_t lx = std::clamp<int64_t>(bx0, 0, std::max<int64_t>(0, W - tw - 2 * s));
      auto tab_at = [&](int64_t ly) { return Rect{lx, ly, lx + tw + 2 * s, ly + th + 2 * s}; };
      const int64_t above = by0 - th - 2 * s;
      std::optional<Rect> tab;
      if (above >= 0 && !overlaps(tab_at(above))) tab = tab_at(above);
      else if (!overlaps(tab_at(by1))) tab = tab_at(by1);
      if (tab) {
        tabs.push_back(*tab);
        font::fill_rect(px, H, W, tab->x0, tab->y0, tab->x1, tab->y1, blue);
        font::draw_text(px, H, W, lx + s, tab->y0 + s, buf, s, white);
      }
    }
  }
  if (strip > 0) {
    // The strip below the page: white, a grey rule along the page's lower edge, the legend at the right.
    const Rect L = overlay_legend_rect(H, W);
    const int64_t Ht = H + strip;
    const std::array<uint8_t, 3> grey{160, 160, 160};
    font::fill_rect(px, Ht, W, 0, H, W, H + s, grey);
    const int64_t pad = 4 * s, lh = font::kGlyphH * s;
    char title[48];
    std::snprintf(title, sizeof title, "TAMPERING P, DRAWN FROM %.2f", o.floor);
    font::draw_text(px, Ht, W, L.x0 + pad, L.y0 + pad, title, s, black);
    // Colour ramp from the floor to 1 (the overlay's colour at opacity 0.8 over white paper, like the map).
    const int64_t rx0 = L.x0 + pad, rx1 = L.x1 - pad, ry0 = L.y0 + pad + lh + 3 * s, ry1 = ry0 + 6 * s;
    for (int64_t x = rx0; x < rx1; ++x) {
      const float tt = float(x - rx0) / float(std::max<int64_t>(1, rx1 - rx0 - 1));
      const std::array<float, 3> hc = heat_colour(tt);
      const float a = 0.35f + 0.45f * tt;
      std::array<uint8_t, 3> col;
      for (int k = 0; k < 3; ++k) col[size_t(k)] = uint8_t(std::lround(255.0f * (1 - a) + hc[size_t(k)] * a));
      font::fill_rect(px, Ht, W, x, ry0, x + 1, ry1, col);
    }
    char lo[16];
    std::snprintf(lo, sizeof lo, "%.2f", o.floor);
    font::draw_text(px, Ht, W, rx0, ry1 + 2 * s, lo, s, black);
    font::draw_text(px, Ht, W, rx1 - font::text_width("1.00", s), ry1 + 2 * s, "1.00", s, black);
    const std::string box = "BOX: PEAK P";
    font::draw_text(px, Ht, W, (rx0 + rx1 - font::text_width(box, s)) / 2, ry1 + 2 * s, box, s, blue);
  }
  return out;
}

}  // namespace diffnet
