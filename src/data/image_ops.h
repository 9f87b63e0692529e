// Image operations of the augmentation pipeline, on uint8 tensors (H, W, C) or masks (H, W).
// Plain single-threaded loops: they run inside loader worker threads (no intra-op parallelism) and give
// the same bytes on every machine.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>

namespace diffnet::data {

enum class Filter { Nearest, Bilinear, Bicubic, Lanczos };

// Resamples to (out_h, out_w). Nearest picks floor((i+0.5)*in/out); the others are separable
// convolutions with PIL-style support widening when downscaling (antialiased), rounded and clamped.
at::Tensor resize(const at::Tensor& img, int64_t out_h, int64_t out_w, Filter filter);

// Rotates counter-clockwise by `degrees` about the image centre, same size, nearest neighbour
// (each output pixel centre maps back to the input pixel containing it); uncovered pixels get `fill`.
at::Tensor rotate_nearest(const at::Tensor& img, double degrees, uint8_t fill);

// Exact rotation by quarter_turns * 90° counter-clockwise, recentred on a canvas of the input's size
// (like rotate with expand=False): parts outside are cut, uncovered parts get `fill`.
at::Tensor rotate_quarter(const at::Tensor& img, int quarter_turns, uint8_t fill);

at::Tensor flip_horizontal(const at::Tensor& img);
at::Tensor flip_vertical(const at::Tensor& img);

// Colour (RGB (H, W, 3) only): blends as out = degenerate + f * (img - degenerate), rounded, clamped;
// degenerate = black (brightness), mean luma (contrast), per-pixel luma (saturation).
at::Tensor adjust_brightness(const at::Tensor& rgb, double factor);
at::Tensor adjust_contrast(const at::Tensor& rgb, double factor);
at::Tensor adjust_saturation(const at::Tensor& rgb, double factor);

// Separable gaussian blur, kernel size k (odd), reflect padding (edge not repeated), rounded.
at::Tensor gaussian_blur(const at::Tensor& img, int k, double sigma);

// 3x3 homography (row-major) mapping src[i] -> dst[i] (points are (x, y)); throws when degenerate.
std::array<double, 9> homography_from_points(const std::array<std::array<double, 2>, 4>& src,
                                             const std::array<std::array<double, 2>, 4>& dst);

// warp_perspective: out(p) = bilinear sample of img at H^-1 p (integer pixel coordinates, like
// cv2.warpPerspective); taps outside the image count as 0. Returns float32 (H, W, C) or (H, W).
at::Tensor warp_perspective(const at::Tensor& img, const std::array<double, 9>& h);

// Pads into a (h, w) canvas filled with `fill`, placing the image at (top, left).
at::Tensor pad_to(const at::Tensor& img, int64_t h, int64_t w, int64_t top, int64_t left, uint8_t fill);

// Contiguous copy of img[y:y+h, x:x+w].
at::Tensor crop(const at::Tensor& img, int64_t y, int64_t x, int64_t h, int64_t w);

}  // namespace diffnet::data
