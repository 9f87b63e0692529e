// The fused GRN's CPU passes (cpu/grn_kernel.h). Both walk the positions in parallel and the channels
// innermost (contiguous, vectorised by the compiler under -march); the sums keep one float or double
// accumulator row per block of positions, so no atomic or thread-count-dependent order is involved.
#include "ops/grn/cpu/grn_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

namespace diffnet::ops::cpu {
namespace {

constexpr int64_t kBlock = 64;  // positions per partial sum

}  // namespace

template <typename T>
void channel_sums(const T* u, const T* v, double* uv, double* u_sum, const GrnShape& s) {
  const int64_t B = s.B, P = s.P, C = s.C;
  const int64_t blocks = (P + kBlock - 1) / kBlock, nparts = B * blocks;
  const int64_t width = u_sum ? 2 * C : C;  // per part: the uv row, then the u row
  std::vector<T> parts(static_cast<size_t>(nparts * width));
  at::parallel_for(0, nparts, 1, [&](int64_t lo, int64_t hi) {
    std::vector<T> acc(static_cast<size_t>(width));
    for (int64_t pi = lo; pi < hi; ++pi) {
      const int64_t b = pi / blocks, p0 = (pi % blocks) * kBlock, p1 = std::min(P, p0 + kBlock);
      std::fill(acc.begin(), acc.end(), T(0));
      T* a_uv = acc.data();
      T* a_u = acc.data() + C;
      for (int64_t p = p0; p < p1; ++p) {
        const T* ur = u + (b * P + p) * C;
        const T* vr = v + (b * P + p) * C;
        for (int64_t c = 0; c < C; ++c) a_uv[c] += ur[c] * vr[c];
        if (u_sum)
          for (int64_t c = 0; c < C; ++c) a_u[c] += ur[c];
      }
      std::copy(acc.begin(), acc.end(), parts.begin() + pi * width);
    }
  });
  at::parallel_for(0, B * C, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t b = i / C, c = i % C;
      double suv = 0.0, su = 0.0;
      for (int64_t k = 0; k < blocks; ++k) {
        const T* part = parts.data() + (b * blocks + k) * width;
        suv += static_cast<double>(part[c]);
        if (u_sum) su += static_cast<double>(part[C + c]);
      }
      uv[i] = suv;
      if (u_sum) u_sum[i] = su;
    }
  });
}

template <typename T>
void channel_affine(const T* u, const T* a, const T* v, const T* k, const T* bias, T* out, const GrnShape& s) {
  const int64_t P = s.P, C = s.C;
  std::vector<T> zero(static_cast<size_t>(C), T(0));
  const T* bias_row = bias ? bias : zero.data();
  at::parallel_for(0, s.B * P, 256, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t b = r / P;
      const T* ur = u + r * C;
      const T* ar = a + b * C;
      T* o = out + r * C;
      if (v) {
        const T* vr = v + r * C;
        const T* kr = k + b * C;
        for (int64_t c = 0; c < C; ++c) o[c] = ur[c] * ar[c] + vr[c] * kr[c] + bias_row[c];
      } else {
        for (int64_t c = 0; c < C; ++c) o[c] = ur[c] * ar[c] + bias_row[c];
      }
    }
  });
}

template void channel_sums<float>(const float*, const float*, double*, double*, const GrnShape&);
template void channel_sums<double>(const double*, const double*, double*, double*, const GrnShape&);
template void channel_affine<float>(const float*, const float*, const float*, const float*, const float*, float*,
                                    const GrnShape&);
template void channel_affine<double>(const double*, const double*, const double*, const double*, const double*,
                                     double*, const GrnShape&);

}  // namespace diffnet::ops::cpu
