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

template <typename T>
void depthwise_backward_weight_nhwc(const T* g, const T* x, T* dk, const DepthwiseShape& s) {
  DIFFNET_CPU_DISPATCH(depthwise_backward_weight_nhwc<T>(g, x, dk, s))
}

}  // namespace diffnet::ops::cpu
