// The DCT inputs of docs/design.md §3: clipped |quantized luma DCT| maps and luminance tables.
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace diffnet {

// Clip value of |coefficient| (values 0..kDctClip, i.e. 21 symbols).
constexpr int64_t kDctClip = 20;

// IJG standard luminance table scaled for quality q (1..100), baseline-clamped to 1..255,
// natural order, int64 (64). scale = q<50 ? 5000/q : 200-2q; entry = clamp((std*scale+50)/100, 1, 255).
at::Tensor ijg_luma_table(int quality);

// All-ones table (no JPEG compression applied), int64 (64).
at::Tensor ones_table();

// IJG quality whose luma table is closest to qt (sum of |differences|, lowest quality on ties);
// exact=true when equal. qt: 64 entries, natural order.
int estimate_jpeg_quality(const at::Tensor& qt, bool* exact = nullptr);

// Luma from RGB as in docs/design.md §3.2: L = (19595R + 38470G + 7471B + 32768) >> 16, uint8 (H, W).
at::Tensor rgb_to_luma(const at::Tensor& rgb);

// Pixel-path DCT map (docs/design.md §3.2): luma - 128, orthonormal 8x8 DCT-II on a grid starting at (0,0),
// divided by qt (int64 64, natural order), rounded half to even, abs, clipped to kDctClip.
// rgb: uint8 (H, W, 3) RGB or (H, W) luma, H and W multiples of 8 (callers pad). Returns uint8 (H, W).
// float64 arithmetic; quotients within 1e-7 of a half-integer count as exact ties. OpenMP over block rows.
at::Tensor pixel_dct(const at::Tensor& rgb, const at::Tensor& qt);

// File-path DCT map: |coef| clipped to kDctClip as uint8, cropped/padded (with 0) to (H, W).
at::Tensor clip_coefficients(const at::Tensor& coef, int64_t height, int64_t width);

}  // namespace diffnet
