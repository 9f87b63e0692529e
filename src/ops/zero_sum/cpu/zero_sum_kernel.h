// CPU kernels of the fused zero-sum operator (raw pointers with element strides, so NCHW, channels_last
// and other strided layouts are read and written in place; no LibTorch types).
// The operator works on materialised full kernels kern (C, M, K*K): the neighbour coefficients a and
// -s = -sum(a) at the centre, so the kernels never look at theta or the filter families.
// Supported: K in {3, 5, 7, 9}, M in {1, 2, 4} (callers pad other M up, see zero_sum.cpp); T float/double.
#pragma once

#include <cstdint>

#include "diffnet/cpu_isa.h"

namespace diffnet::ops::cpu {

struct ZeroSumShape {
  int64_t B = 0, C = 0, H = 0, W = 0;  // input (B, C, H, W)
  int64_t M = 0, K = 0;                // filters per channel, kernel side
};

// Element strides of a (B, C, H, W) tensor.
struct Strides {
  int64_t b = 0, c = 0, h = 0, w = 0;
};

// The kernels, each compiled once per instruction-set level (diffnet/cpu_isa.h, zero_sum_kernel.cpp) and
// declared here in every level's namespace; the functions of the same names below call the level of
// cpu_isa(). Contracts:
//
// zero_sum_cpu_supported: true when the CPU kernels are instantiated for this K and M.
//
// zero_sum_forward_cpu: out (B,C,H,W) = sum_m weight[c,m] * |corr(x~, kern[c,m])| + bias[c], x~ the
// iterated reflection. Parallel over (b, c) planes (OpenMP through at::parallel_for). Any strides work,
// but channel-innermost layouts are slow to gather plane by plane: convert those with
// channels_last_to_planes first.
//
// zero_sum_forward_nhwc: the same forward on contiguous channel-innermost tensors (channels_last storage,
// (B, H, W, C) in memory) in and out, no layout conversion: vectorised over channels, so C must be a
// multiple of zero_sum_nhwc_lanes<T>() (the SIMD width of the level in use). For inference: the autograd
// path keeps the planes.
//
// zero_sum_backward_cpu: backward of the forward above for the upstream gradient g (B,C,H,W), any strides:
//   dx (B,C,H,W)      exact adjoint of the reflected access (halo-extended buffer folded back);
//   dkern (C,M,K*K)   gradient w.r.t. the full kernels (centre included);
//   dweight (C,M), dbias (C).
// Weight gradients use a two-phase reduction: one partial per (b, c) plane, each computed sequentially
// by one thread, then summed over b in a fixed order (in double), so results are bit-identical run
// after run and independent of the thread count. Any of dx/dkern/dweight/dbias may be null (skipped).
//
// channels_last_to_planes / planes_to_channels_last: layout conversions for channel-innermost tensors
// (channels_last), faster than ATen's copy here (a tiled, parallel transpose; docs/ops.md): src with
// strides ss -> dst contiguous (B, C, H, W), and back.
#define DN_ZERO_SUM_KERNELS                                                                                     \
  bool zero_sum_cpu_supported(int64_t K, int64_t M);                                                         \
  template <typename T>                                                                                      \
  void zero_sum_forward_cpu(const T* x, const Strides& xs, const T* kern, const T* weight, const T* bias,    \
                            T* out, const Strides& os, const ZeroSumShape& s);                               \
  template <typename T>                                                                                      \
  int64_t zero_sum_nhwc_lanes();                                                                             \
  template <typename T>                                                                                      \
  void zero_sum_forward_nhwc(const T* x, const T* kern, const T* weight, const T* bias, T* out,              \
                             const ZeroSumShape& s);                                                         \
  template <typename T>                                                                                      \
  void zero_sum_backward_cpu(const T* x, const Strides& xs, const T* g, const Strides& gs, const T* kern,    \
                             const T* weight, T* dx, const Strides& dxs, T* dkern, T* dweight, T* dbias,     \
                             const ZeroSumShape& s);                                                         \
  template <typename T>                                                                                      \
  void channels_last_to_planes(const T* src, const Strides& ss, T* dst, const ZeroSumShape& s);              \
  template <typename T>                                                                                      \
  void planes_to_channels_last(const T* src, T* dst, const Strides& ds, const ZeroSumShape& s);
DIFFNET_CPU_FOR_EACH_ISA(DN_ZERO_SUM_KERNELS)
#undef DN_ZERO_SUM_KERNELS

inline bool zero_sum_cpu_supported(int64_t K, int64_t M) { DIFFNET_CPU_DISPATCH(zero_sum_cpu_supported(K, M)) }
template <typename T>
void zero_sum_forward_cpu(const T* x, const Strides& xs, const T* kern, const T* weight, const T* bias, T* out,
                          const Strides& os, const ZeroSumShape& s) {
  DIFFNET_CPU_DISPATCH(zero_sum_forward_cpu<T>(x, xs, kern, weight, bias, out, os, s))
}
template <typename T>
int64_t zero_sum_nhwc_lanes() {
  DIFFNET_CPU_DISPATCH(zero_sum_nhwc_lanes<T>())
}
template <typename T>
void zero_sum_forward_nhwc(const T* x, const T* kern, const T* weight, const T* bias, T* out, const ZeroSumShape& s) {
  DIFFNET_CPU_DISPATCH(zero_sum_forward_nhwc<T>(x, kern, weight, bias, out, s))
}
template <typename T>
void zero_sum_backward_cpu(const T* x, const Strides& xs, const T* g, const Strides& gs, const T* kern,
                           const T* weight, T* dx, const Strides& dxs, T* dkern, T* dweight, T* dbias,
                           const ZeroSumShape& s) {
  DIFFNET_CPU_DISPATCH(zero_sum_backward_cpu<T>(x, xs, g, gs, kern, weight, dx, dxs, dkern, dweight, dbias, s))
}
template <typename T>
void channels_last_to_planes(const T* src, const Strides& ss, T* dst, const ZeroSumShape& s) {
  DIFFNET_CPU_DISPATCH(channels_last_to_planes<T>(src, ss, dst, s))
}
template <typename T>
void planes_to_channels_last(const T* src, T* dst, const Strides& ds, const ZeroSumShape& s) {
  DIFFNET_CPU_DISPATCH(planes_to_channels_last<T>(src, dst, ds, s))
}

}  // namespace diffnet::ops::cpu
