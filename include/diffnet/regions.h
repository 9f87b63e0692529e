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

// One connected component of the thresholded map.
struct Region {
  int64_t x = 0, y = 0, w = 0, h = 0;  // bounding box, pixels
  int64_t area = 0;                    // pixels in the component
  double peak = 0;                     // max probability inside
  double mean = 0;                     // mean probability inside
};

// Default smallest component kept by find_regions: specks of a few pixels are noise, not edits.
constexpr int64_t kDefaultMinRegionArea = 16;

// 8-connected components of {prob > threshold} with area >= min_area, sorted by area (largest first;
// ties by y, then x). prob: float (H, W).
std::vector<Region> find_regions(const at::Tensor& prob, double threshold, int64_t min_area = kDefaultMinRegionArea);

// {"bbox": [x, y, w, h], "area": n, "peak": p, "mean": m}
nlohmann::json region_to_json(const Region& r);

// Overlay for a glance: the document in (slightly dimmed) grey, tinted red -> yellow where the
// probability is high (opacity grows with p above 0.1), and a blue rectangle around every region.
// rgb: uint8 (H, W, 3); prob: float (H, W). Returns uint8 (H, W, 3).
at::Tensor render_overlay(const at::Tensor& rgb, const at::Tensor& prob, const std::vector<Region>& regions);

}  // namespace diffnet
