// Print-scan look for rendered pages (paper tint, faded ink, slight rotation, blur, noise) and the
// JPEG round trip that gives a page its compression history.
#pragma once

#include <nlohmann/json.hpp>

#include "synth/ops.h"
#include "synth/rng.h"

namespace diffnet::synth {

struct PrintScan {
  double angle_deg = 0;    // rotation about the centre
  double blur_sigma = 0;   // Gaussian blur
  double noise_sd = 0;     // luminance noise
  double fade = 1;         // ink contrast: p' = paper - (paper - p) * fade
  Color tint{255, 255, 255};  // paper colour multiplier (255 = none)
  nlohmann::json to_json() const;
};

PrintScan sample_print_scan(Rng& rng);
// Applies the look to the page and moves its word boxes (rotated bounding boxes) and text origins;
// marks the page degraded.
void apply_print_scan(Page& page, const PrintScan& ps, Rng& rng);
// Encodes at JPEG quality q and decodes again (io module); marks the page degraded.
void jpeg_round_trip(Page& page, int quality);
// Scales the page by factor s (< 1: area averaging) with its boxes and styles.
void scale_page(Page& page, double s);
// Crops the page to box b (inside the page); keeps the words fully inside, shifted.
void crop_page(Page& page, const Box& b);

}  // namespace diffnet::synth
