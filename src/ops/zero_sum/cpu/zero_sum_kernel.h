// CPU kernels of the fused zero-sum operator (raw pointers, contiguous NCHW planes; no LibTorch types).
// The operator works on materialised full kernels kern (C, M, K*K): the neighbour coefficients a and
// -s = -sum(a) at the centre, so the kernels never look at theta or the filter families.
// Supported: K in {3, 5, 7, 9}, M in {1, 2, 4} (callers pad other M up, see zero_sum.cpp); T float/double.
#pragma once

#include <cstdint>

namespace diffnet::ops::cpu {

struct ZeroSumShape {
  int64_t B = 0, C = 0, H = 0, W = 0;  // input (B, C, H, W), contiguous NCHW
  int64_t M = 0, K = 0;                // filters per channel, kernel side
};

// True when the CPU kernels are instantiated for this K and M.
bool zero_sum_cpu_supported(int64_t K, int64_t M);

// out (B,C,H,W) = sum_m weight[c,m] * |corr(x~, kern[c,m])| + bias[c], x~ the iterated reflection.
// Parallel over (b, c) planes (OpenMP through at::parallel_for).
template <typename T>
void zero_sum_forward_cpu(const T* x, const T* kern, const T* weight, const T* bias, T* out,
                          const ZeroSumShape& s);

// Backward of the forward above for the upstream gradient g (B,C,H,W):
//   dx (B,C,H,W)      exact adjoint of the reflected access (halo-extended buffer folded back);
//   dkern (C,M,K*K)   gradient w.r.t. the full kernels (centre included);
//   dweight (C,M), dbias (C).
// Weight gradients use a two-phase reduction: one partial per (b, c) plane, each computed sequentially
// by one thread, then summed over b in a fixed order (in double), so results are bit-identical run
// after run and independent of the thread count. Any of dx/dkern/dweight/dbias may be null (skipped).
template <typename T>
void zero_sum_backward_cpu(const T* x, const T* g, const T* kern, const T* weight, T* dx, T* dkern,
                           T* dweight, T* dbias, const ZeroSumShape& s);

}  // namespace diffnet::ops::cpu
