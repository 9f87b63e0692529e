// Turning a probability map into things a person reads: 8-bit maps, tampered regions (connected
// components) and a heat-map overlay on the document.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace diffnet {

// float (H, W) probabilities in [0, 1] -> uint8 (H, W) round(p * 255) (half away from zero), clamped.
at::Tensor prob_to_u8(const at::Tensor& prob);

// One region of the thresholded map (see find_regions).
struct Region {
  int64_t x = 0, y = 0, w = 0, h = 0;  // bounding box, pixels
  int64_t area = 0;                    // pixels in the component
  double peak = 0;                     // max probability inside
  double mean = 0;                     // mean probability inside
};

// Default smallest component kept by find_regions: specks of a few pixels are noise, not edits.
constexpr int64_t kDefaultMinRegionArea = 16;

// Default gap bridged by find_regions in predict/serve: the letters and words of one edited line form
// one region, not one per glyph (at 150-300 dpi letters stand 1-10 px apart, words 8-25 px).
constexpr int64_t kDefaultRegionGap = 16;

// Regions of {prob > threshold}: hot pixels joined by chains whose steps are at most gap + 1 pixels
// (Chebyshev; gap 0: the 8-connected components), kept with area (hot pixels) >= min_area, sorted by
// area (largest first; ties by y, then x). Box, area, peak and mean count hot pixels only. prob: (H, W).
std::vector<Region> find_regions(const at::Tensor& prob, double threshold, int64_t min_area = kDefaultMinRegionArea,
                                 int64_t gap = 0);

// {"bbox": [x, y, w, h], "area": n, "peak": p, "mean": m}
nlohmann::json region_to_json(const Region& r);

struct OverlayOptions {
  double floor = 0.5;   // nothing is drawn where p < floor: those pixels keep the input's colour
  bool legend = true;   // colour ramp with its probability labels, on a strip below the page
  bool labels = true;   // each region's peak probability above its box (below when taken; none if both are)
};

// Overlay a person can read: the document as it is wherever p < floor; from the floor up, a colour from
// amber (p = floor) to red (p = 1) blended over it with an opacity growing from 0.35 to 0.8; a blue
// rectangle just outside every region's box, labelled with the region's peak probability (labels never
// overlap: a region whose places above and below its box are taken keeps its box only); a legend on a
// strip added below the page, so that it never hides any of the document. rgb: uint8 (H, W, 3); prob: float
// (H, W). Returns uint8 (H + overlay_legend_strip(H, W), W, 3) with the legend, (H, W, 3) without it.
at::Tensor render_overlay(const at::Tensor& rgb, const at::Tensor& prob, const std::vector<Region>& regions,
                          const OverlayOptions& options = {});

// The legend's rectangle [x0, x1) x [y0, y1) in the overlay of an H x W page: inside the strip below the page,
// right-aligned (empty when the page is narrower than the legend).
struct Rect {
  int64_t x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};
Rect overlay_legend_rect(int64_t H, int64_t W);

// Rows render_overlay adds below an H x W page for the legend (0 when it does not fit the page's width).
int64_t overlay_legend_strip(int64_t H, int64_t W);

}  // namespace diffnet
