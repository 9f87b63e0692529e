// The depthwise convolution's weight gradient on NHWC (cpu/depthwise_kernel.h). It walks the channels in
// chunks of V held in registers (the compiler vectorises the fixed-length inner loops under -march), one
// accumulator per tap of a kernel row (K independent chains), with K a template parameter so the tap
// loops unroll; columns whose taps reach past the border take the checked path.
#include "ops/depthwise/cpu/depthwise_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "diffnet/common.h"

namespace diffnet::ops::cpu {
namespace {

constexpr int64_t V = 8;          // channels per register chunk (one AVX2 float register)
constexpr int64_t kRowBlock = 4;  // rows per partial sum of the weight gradient

// Adds to part (K*K, C) the products of gradient row (b, h) with the input rows it saw.
template <typename T, int K>
void weight_row(const T* g, const T* x, T* part, int64_t b, int64_t h, const DepthwiseShape& s) {
  constexpr int64_t P = K / 2;
  const int64_t H = s.H, W = s.W, C = s.C;
  const T* grow = g + ((b * H + h) * W) * C;
  for (int i = 0; i < K; ++i) {
    const int64_t src = h + i - P;
    if (src < 0 || src >= H) continue;
    const T* xrow = x + ((b * H + src) * W) * C;
    T* dst = part + (i * K) * C;
    // Column w of g meets column w + j - P of x for tap j; checked for columns near the border.
    auto column = [&](int64_t w, int64_t c0, int64_t n, T (*acc)[V]) {
      for (int j = 0; j < K; ++j) {
        const int64_t col = w + j - P;
        if (col < 0 || col >= W) continue;
        const T* gg = grow + w * C + c0;
        const T* xx = xrow + col * C + c0;
        for (int64_t c = 0; c < n; ++c) acc[j][c] += gg[c] * xx[c];
      }
    };
    const int64_t cfull = C - C % V;
    for (int64_t c0 = 0; c0 < C; c0 += V) {
      const int64_t n = std::min(V, C - c0);
      T acc[K][V] = {};  // K independent accumulators: one per tap of this row
      if (c0 < cfull) {
        int64_t w = 0;
        for (; w < std::min<int64_t>(P, W); ++w) column(w, c0, V, acc);
        for (; w < W - P; ++w) {
          const T* gg = grow + w * C + c0;
          const T* xx = xrow + (w - P) * C + c0;
          for (int j = 0; j < K; ++j)
            for (int64_t c = 0; c < V; ++c) acc[j][c] += gg[c] * xx[j * C + c];
        }
        for (; w < W; ++w) column(w, c0, V, acc);
      } else {
        for (int64_t w = 0; w < W; ++w) column(w, c0, n, acc);
      }
      for (int j = 0; j < K; ++j)
        for (int64_t c = 0; c < n; ++c) dst[j * C + c0 + c] += acc[j][c];
    }
  }
}

template <typename T, int K>
void weight_all(const T* g, const T* x, T* dk, const DepthwiseShape& s) {
  const int64_t blocks_per_image = (s.H + kRowBlock - 1) / kRowBlock;
  const int64_t nparts = s.B * blocks_per_image, taps = K * K * s.C;
  std::vector<T> parts(static_cast<size_t>(nparts * taps), T(0));
  at::parallel_for(0, nparts, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t pi = lo; pi < hi; ++pi) {
      const int64_t b = pi / blocks_per_image, h0 = (pi % blocks_per_image) * kRowBlock;
      for (int64_t h = h0; h < std::min(s.H, h0 + kRowBlock); ++h)
        weight_row<T, K>(g, x, parts.data() + pi * taps, b, h, s);
    }
  });
  at::parallel_for(0, taps, 256, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      double sum = 0.0;
      for (int64_t pi = 0; pi < nparts; ++pi) sum += static_cast<double>(parts[pi * taps + t]);
      dk[t] = static_cast<T>(sum);
    }
  });
}


}  // namespace

template <typename T>
void depthwise_backward_weight_nhwc(const T* g, const T* x, T* dk, const DepthwiseShape& s) {
  switch (s.K) {
    case 1: return weight_all<T, 1>(g, x, dk, s);
    case 3: return weight_all<T, 3>(g, x, dk, s);
    case 5: return weight_all<T, 5>(g, x, dk, s);
    case 7: return weight_all<T, 7>(g, x, dk, s);
    case 9: return weight_all<T, 9>(g, x, dk, s);
  }
  throw Error("depthwise", "kernel size " + std::to_string(s.K) + " not in {1, 3, 5, 7, 9}");
}

template void depthwise_backward_weight_nhwc<float>(const float*, const float*, float*, const DepthwiseShape&);
template void depthwise_backward_weight_nhwc<double>(const double*, const double*, double*, const DepthwiseShape&);

}  // namespace diffnet::ops::cpu
