// The CPU weight-gradient kernel of the depthwise K x K convolution (stride 1, zero padding K/2, one
// filter per channel) on channel-innermost (NHWC, i.e. channels_last contiguous) tensors; raw pointers,
// no LibTorch types. (The input gradient is a forward convolution with the flipped taps: depthwise.cpp.)
#pragma once

#include <cstdint>

#include "diffnet/cpu_isa.h"

namespace diffnet::ops::cpu {

struct DepthwiseShape {
  int64_t B = 0, H = 0, W = 0, C = 0;  // NHWC
  int64_t K = 0;                       // odd, 1..9
};

// dk (K*K, C) = the taps' gradient for g and the forward input x (B,H,W,C). Partial sums over fixed
// blocks of rows, then summed in double in a fixed order: the same bits whatever the thread count.
// Declared once per instruction-set level (diffnet/cpu_isa.h); the function below calls the level in use.
#define DN_DEPTHWISE_KERNELS                                                                                  \
  template <typename T>                                                                                       \
  void depthwise_backward_weight_nhwc(const T* g, const T* x, T* dk, const DepthwiseShape& s);
DIFFNET_CPU_FOR_EACH_ISA(DN_DEPTHWISE_KERNELS)
#undef DN_DEPTHWISE_KERNELS

struct DwLnShape {
  int64_t B = 0, H = 0, W = 0, C = 0;  // NHWC
  float eps = 1e-6f;
};

// Inference: out (B,H,W,C) = LayerNorm over C (weight g, bias be, eps) of the depthwise 7x7 convolution
// (stride 1, zero padding 3) of x (B,H,W,C) with taps k (C, 49) and bias kb (C); C a multiple of 4; x and
// out float32 (S = float) or bf16 bit patterns (S = uint16_t, rounded to nearest even once at the end),
// the arithmetic float32. The convolution of one output row stays in a per-thread buffer that LayerNorm
// reads: no (B,H,W,C) intermediate. lanes(C): the channels per vector the level uses for C (0: C not a
// multiple of 4).
// faster(C, element_bytes): whether this level's kernel was measured faster than LibTorch's convolution +
// LayerNorm (oneDNN at the same level) for C channels of that size: avx512 where a pixel's channels are
// not a multiple of 1 KB apart (such strides put a block's loads into 4 L1 sets or fewer), avx2 below 128
// channels, base never (docs/ops.md, "Depthwise convolution + LayerNorm").
#define DN_DWLN_KERNELS                                                                                     \
  int64_t depthwise7_layer_norm_lanes(int64_t C);                                                           \
  bool depthwise7_layer_norm_faster(int64_t C, int64_t element_bytes);                                      \
  template <typename S>                                                                                     \
  void depthwise7_layer_norm_nhwc(const S* x, const float* k, const float* kb, const float* g, const float* be, \
                                  S* out, const DwLnShape& s);
DIFFNET_CPU_FOR_EACH_ISA(DN_DWLN_KERNELS)
#undef DN_DWLN_KERNELS

template <typename T>
void depthwise_backward_weight_nhwc(const T* g, const T* x, T* dk, const DepthwiseShape& s) {
  DIFFNET_CPU_DISPATCH(depthwise_backward_weight_nhwc<T>(g, x, dk, s))
}

inline int64_t depthwise7_layer_norm_lanes(int64_t C) { DIFFNET_CPU_DISPATCH(depthwise7_layer_norm_lanes(C)) }
inline bool depthwise7_layer_norm_faster(int64_t C, int64_t element_bytes) {
  DIFFNET_CPU_DISPATCH(depthwise7_layer_norm_faster(C, element_bytes))
}
template <typename S>
void depthwise7_layer_norm_nhwc(const S* x, const float* k, const float* kb, const float* g, const float* be, S* out,
                                const DwLnShape& s) {
  DIFFNET_CPU_DISPATCH(depthwise7_layer_norm_nhwc<S>(x, k, kb, g, be, out, s))
}

}  // namespace diffnet::ops::cpu
