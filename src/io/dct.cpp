// DCT inputs of docs/design.md §3: IJG tables, quality estimate, luma, pixel-path DCT, clipped file coefficients.
#include "diffnet/dct.h"

#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "diffnet/common.h"

namespace diffnet {
namespace {

// ITU-T T.81 Annex K.1 luminance table, natural (row-major) order.
constexpr int kStdLuma[64] = {
    16, 11, 10, 16, 24,  40,  51,  61,   //
    12, 12, 14, 19, 26,  58,  60,  55,   //
    14, 13, 16, 24, 40,  57,  69,  56,   //
    14, 17, 22, 29, 51,  87,  80,  62,   //
    18, 22, 37, 56, 68,  109, 103, 77,   //
    24, 35, 55, 64, 81,  104, 113, 92,   //
    49, 64, 78, 87, 103, 121, 120, 101,  //
    72, 92, 95, 98, 112, 100, 103, 99};

void ijg_table_values(int quality, int64_t out[64]) {
  int scale = quality < 50 ? 5000 / quality : 200 - 2 * quality;
  for (int i = 0; i < 64; ++i) {
    int64_t v = (static_cast<int64_t>(kStdLuma[i]) * scale + 50) / 100;
    out[i] = v < 1 ? 1 : (v > 255 ? 255 : v);
  }
}

// 8x8 orthonormal DCT-II basis: kBasis[u][x] = a(u) cos((2x+1) u pi / 16).
struct Basis {
  double c[8][8];
  Basis() {
    const double pi = std::acos(-1.0);
    for (int u = 0; u < 8; ++u)
      for (int x = 0; x < 8; ++x)
        c[u][x] = (u == 0 ? std::sqrt(1.0 / 8.0) : std::sqrt(2.0 / 8.0)) * std::cos((2 * x + 1) * u * pi / 16.0);
  }
};
const Basis& basis() {
  static const Basis b;
  return b;
}

// Rounds half to even. Values within 1e-7 of a half-integer are treated as exact ties: the float64
// DCT of integer input is exact to ~1e-12, and frequencies (0|4, 0|4) produce exact multiples of 1/8.
inline int64_t round_half_even(double v) {
  double f = std::floor(v);
  double frac = v - f;
  if (std::fabs(frac - 0.5) < 1e-7) {
    int64_t fi = static_cast<int64_t>(f);
    return (fi % 2 == 0) ? fi : fi + 1;
  }
  return static_cast<int64_t>(std::floor(v + 0.5));
}

void check_table(const at::Tensor& qt, const char* who) {
  if (qt.numel() != 64) throw Error(who, "quantization table must have 64 entries, got " + std::to_string(qt.numel()));
}

}  // namespace

at::Tensor ijg_luma_table(int quality) {
  if (quality < 1 || quality > 100)
    throw Error("ijg_luma_table", "JPEG quality must be 1..100, got " + std::to_string(quality));
  at::Tensor t = at::empty({64}, at::kLong);
  ijg_table_values(quality, t.data_ptr<int64_t>());
  return t;
}

at::Tensor ones_table() { return at::ones({64}, at::kLong); }

int estimate_jpeg_quality(const at::Tensor& qt, bool* exact) {
  check_table(qt, "estimate_jpeg_quality");
  at::Tensor q = qt.to(at::kLong).contiguous().view({64});
  const int64_t* p = q.data_ptr<int64_t>();
  int best = -1;
  int64_t best_err = 0;
  for (int quality = 1; quality <= 100; ++quality) {
    int64_t tab[64];
    ijg_table_values(quality, tab);
    int64_t err = 0;
    for (int i = 0; i < 64; ++i) err += std::llabs(tab[i] - p[i]);
    if (best < 0 || err < best_err) best = quality, best_err = err;
  }
  if (exact) *exact = best_err == 0;
  return best;
}

at::Tensor rgb_to_luma(const at::Tensor& rgb) {
  if (rgb.scalar_type() != at::kByte || rgb.dim() != 3 || rgb.size(2) != 3)
    throw Error("rgb_to_luma", "expected uint8 (H, W, 3), got " + std::string(rgb.toString()) + " " +
                                   c10::str(rgb.sizes()));
  at::Tensor src = rgb.contiguous();
  const int64_t n = src.size(0) * src.size(1);
  at::Tensor out = at::empty({src.size(0), src.size(1)}, at::kByte);
  const uint8_t* s = src.data_ptr<uint8_t>();
  uint8_t* d = out.data_ptr<uint8_t>();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    d[i] = static_cast<uint8_t>((19595u * s[3 * i] + 38470u * s[3 * i + 1] + 7471u * s[3 * i + 2] + 32768u) >> 16);
  return out;
}

at::Tensor pixel_dct(const at::Tensor& rgb, const at::Tensor& qt) {
  check_table(qt, "pixel_dct");
  const bool gray = rgb.dim() == 2;
  if (rgb.scalar_type() != at::kByte || !(gray || (rgb.dim() == 3 && rgb.size(2) == 3)))
    throw Error("pixel_dct", "expected uint8 (H, W, 3) or (H, W), got " + std::string(rgb.toString()) + " " +
                                 c10::str(rgb.sizes()));
  const int64_t H = rgb.size(0), W = rgb.size(1);
  if (H % 8 != 0 || W % 8 != 0)
    throw Error("pixel_dct", "height and width must be multiples of 8, got " + std::to_string(H) + "x" +
                                 std::to_string(W));
  at::Tensor q64 = qt.to(at::kLong).contiguous().view({64});
  double qd[64];
  for (int i = 0; i < 64; ++i) {
    int64_t v = q64.data_ptr<int64_t>()[i];
    if (v < 1) throw Error("pixel_dct", "quantization table entries must be >= 1");
    qd[i] = static_cast<double>(v);
  }
  double inv_q[64];
  for (int i = 0; i < 64; ++i) inv_q[i] = 1.0 / qd[i];
  at::Tensor src = rgb.contiguous();
  at::Tensor out = at::empty({H, W}, at::kByte);
  const uint8_t* s = src.data_ptr<uint8_t>();
  uint8_t* d = out.data_ptr<uint8_t>();
  const auto& C = basis().c;
  const int64_t rows = H / 8, cols = W / 8;
#pragma omp parallel for schedule(static)
  for (int64_t by = 0; by < rows; ++by) {
    double x[8][8], t[8][8];
    for (int64_t bx = 0; bx < cols; ++bx) {
      // Luma - 128 of the block.
      for (int i = 0; i < 8; ++i) {
        const int64_t off = (by * 8 + i) * W + bx * 8;
        if (gray) {
          for (int j = 0; j < 8; ++j) x[i][j] = static_cast<double>(s[off + j]) - 128.0;
        } else {
          const uint8_t* p = s + 3 * off;
          for (int j = 0; j < 8; ++j)
            x[i][j] = static_cast<double>(
                          (19595u * p[3 * j] + 38470u * p[3 * j + 1] + 7471u * p[3 * j + 2] + 32768u) >> 16) -
                      128.0;
        }
      }
      // Rows: t[i][v] = sum_j x[i][j] C[v][j].
      for (int i = 0; i < 8; ++i)
        for (int v = 0; v < 8; ++v) {
          double acc = 0.0;
          for (int j = 0; j < 8; ++j) acc += x[i][j] * C[v][j];
          t[i][v] = acc;
        }
      // Columns: X[u][v] = sum_i C[u][i] t[i][v]; quantize, abs, clip.
      for (int u = 0; u < 8; ++u) {
        uint8_t* drow = d + (by * 8 + u) * W + bx * 8;
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int i = 0; i < 8; ++i)
          for (int v = 0; v < 8; ++v) acc[v] += C[u][i] * t[i][v];
        for (int v = 0; v < 8; ++v) {
          int64_t r = std::llabs(round_half_even(acc[v] * inv_q[u * 8 + v]));
          drow[v] = static_cast<uint8_t>(r > kDctClip ? kDctClip : r);
        }
      }
    }
  }
  return out;
}

at::Tensor clip_coefficients(const at::Tensor& coef, int64_t height, int64_t width) {
  if (coef.dim() != 2) throw Error("clip_coefficients", "expected a 2-D coefficient map");
  if (height < 0 || width < 0) throw Error("clip_coefficients", "negative size");
  // Clamp before abs: |-32768| does not fit the coefficients' int16, and a 64-bit copy of a page's map
  // would be 8 bytes a pixel.
  at::Tensor a = coef.clamp(-kDctClip, kDctClip).abs_().to(at::kByte);
  at::Tensor out = at::zeros({height, width}, at::kByte);
  const int64_t h = std::min(height, a.size(0)), w = std::min(width, a.size(1));
  if (h > 0 && w > 0) out.narrow(0, 0, h).narrow(1, 0, w).copy_(a.narrow(0, 0, h).narrow(1, 0, w));
  return out;
}

}  // namespace diffnet
