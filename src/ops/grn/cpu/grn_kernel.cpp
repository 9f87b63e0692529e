// The fused GRN's CPU passes, and those of GELU + GRN (cpu/grn_kernel.h). All walk the positions in
// parallel and the channels innermost (contiguous, vectorised by the compiler under -march); the sums keep
// one float or double accumulator row per block of positions, so no atomic or thread-count-dependent order
// is involved.
#include "ops/grn/cpu/grn_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "ops/grn/cpu/gelu_math.h"

namespace diffnet::ops::cpu {
namespace {

constexpr int64_t kBlock = 64;  // positions per partial sum

// Per-channel sums over the positions of each image, `width` values per channel row: `rows(b, p0, p1, acc)`
// adds positions [p0, p1) of image b into acc (width T values, zeroed first); the blocks' rows are then
// added in double, block by block, into out[j] (B, C) for j < width / C. Fixed blocks and a fixed order:
// the same bits for any thread count.
template <typename T, typename Rows>
void block_sums(const GrnShape& s, int64_t width, Rows rows, double* const* out) {
  const int64_t B = s.B, P = s.P, C = s.C;
  const int64_t blocks = (P + kBlock - 1) / kBlock, nparts = B * blocks, nout = width / C;
  std::vector<T> parts(static_cast<size_t>(nparts * width));
  at::parallel_for(0, nparts, 1, [&](int64_t lo, int64_t hi) {
    std::vector<T> acc(static_cast<size_t>(width));
    for (int64_t pi = lo; pi < hi; ++pi) {
      const int64_t b = pi / blocks, p0 = (pi % blocks) * kBlock, p1 = std::min(P, p0 + kBlock);
      std::fill(acc.begin(), acc.end(), T(0));
      rows(b, p0, p1, acc.data());
      std::copy(acc.begin(), acc.end(), parts.begin() + pi * width);
    }
  });
  at::parallel_for(0, B * C, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t b = i / C, c = i % C;
      for (int64_t j = 0; j < nout; ++j) {
        double sum = 0.0;
        for (int64_t k = 0; k < blocks; ++k) sum += static_cast<double>(parts[(b * blocks + k) * width + j * C + c]);
        out[j][i] = sum;
      }
    }
  });
}

}  // namespace

template <typename S>
void channel_sums(const S* u, const S* v, double* uv, double* u_sum, const GrnShape& s) {
  using T = compute_t<S>;
  const int64_t P = s.P, C = s.C;
  double* out[2] = {uv, u_sum};
  block_sums<T>(s, u_sum ? 2 * C : C, [&](int64_t b, int64_t p0, int64_t p1, T* acc) {
    T* a_uv = acc;
    T* a_u = acc + C;  // the u row, when asked for
    for (int64_t p = p0; p < p1; ++p) {
      const S* ur = u + (b * P + p) * C;
      const S* vr = v + (b * P + p) * C;
      for (int64_t c = 0; c < C; ++c) a_uv[c] += load(ur[c]) * load(vr[c]);
      if (u_sum)
        for (int64_t c = 0; c < C; ++c) a_u[c] += load(ur[c]);
    }
  }, out);
}

template <typename S>
void gelu_channel_sums(const S* h, S* g, double* gg, const GrnShape& s) {
  using T = compute_t<S>;
  const int64_t P = s.P, C = s.C;
  double* out[1] = {gg};
  block_sums<T>(s, C, [&](int64_t b, int64_t p0, int64_t p1, T* acc) {
    for (int64_t p = p0; p < p1; ++p) {
      const S* hr = h + (b * P + p) * C;
      S* gr = g + (b * P + p) * C;
      for (int64_t c = 0; c < C; ++c) {
        store(gr[c], gelu_value(load(hr[c])));
        const T v = load(gr[c]);  // the stored value: what the affine pass reads
        acc[c] += v * v;
      }
    }
  }, out);
}

template <typename T>
void gelu_grn_input_grad(const T* dy, const T* a, const T* g, const T* k, const T* h, T* dh, const GrnShape& s) {
  const int64_t P = s.P, C = s.C;
  at::parallel_for(0, s.B * P, 256, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t b = r / P;
      const T* dyr = dy + r * C;
      const T* gr = g + r * C;
      const T* hr = h + r * C;
      const T* ar = a + b * C;
      const T* kr = k + b * C;
      T* o = dh + r * C;
      for (int64_t c = 0; c < C; ++c) o[c] = (dyr[c] * ar[c] + gr[c] * kr[c]) * gelu_derivative(hr[c]);
    }
  });
}

template <typename S>
void channel_affine(const S* u, const compute_t<S>* a, const S* v, const compute_t<S>* k, const compute_t<S>* bias,
                    S* out, const GrnShape& s) {
  using T = compute_t<S>;
  const int64_t P = s.P, C = s.C;
  std::vector<T> zero(static_cast<size_t>(C), T(0));
  const T* bias_row = bias ? bias : zero.data();
  at::parallel_for(0, s.B * P, 256, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t b = r / P;
      const S* ur = u + r * C;
      const T* ar = a + b * C;
      S* o = out + r * C;
      if (v) {
        const S* vr = v + r * C;
        const T* kr = k + b * C;
        for (int64_t c = 0; c < C; ++c) store(o[c], load(ur[c]) * ar[c] + load(vr[c]) * kr[c] + bias_row[c]);
      } else {
        for (int64_t c = 0; c < C; ++c) store(o[c], load(ur[c]) * ar[c] + bias_row[c]);
      }
    }
  });
}

template void channel_sums<float>(const float*, const float*, double*, double*, const GrnShape&);
template void channel_sums<double>(const double*, const double*, double*, double*, const GrnShape&);
template void gelu_channel_sums<float>(const float*, float*, double*, const GrnShape&);
template void gelu_channel_sums<double>(const double*, double*, double*, const GrnShape&);
template void channel_sums<Bf16>(const Bf16*, const Bf16*, double*, double*, const GrnShape&);
template void gelu_channel_sums<Bf16>(const Bf16*, Bf16*, double*, const GrnShape&);
template void channel_affine<Bf16>(const Bf16*, const float*, const Bf16*, const float*, const float*, Bf16*,
                                   const GrnShape&);
template void gelu_grn_input_grad<float>(const float*, const float*, const float*, const float*, const float*, float*,
                                         const GrnShape&);
template void gelu_grn_input_grad<double>(const double*, const double*, const double*, const double*, const double*,
                                          double*, const GrnShape&);
template void channel_affine<float>(const float*, const float*, const float*, const float*, const float*, float*,
                                    const GrnShape&);
template void channel_affine<double>(const double*, const double*, const double*, const double*, const double*,
                                     double*, const GrnShape&);

}  // namespace diffnet::ops::cpu
