// The CPU weight-gradient kernel of the depthwise K x K convolution (stride 1, zero padding K/2, one
// filter per channel) on channel-innermost (NHWC, i.e. channels_last contiguous) tensors; raw pointers,
// no LibTorch types. (The input gradient is a forward convolution with the flipped taps: depthwise.cpp.)
#pragma once

#include <cstdint>

namespace diffnet::ops::cpu {

struct DepthwiseShape {
  int64_t B = 0, H = 0, W = 0, C = 0;  // NHWC
  int64_t K = 0;                       // odd, 1..9
};

// dk (K*K, C) = the taps' gradient for g and the forward input x (B,H,W,C). Partial sums over fixed
// blocks of rows, then summed in double in a fixed order: the same bits whatever the thread count.
template <typename T>
void depthwise_backward_weight_nhwc(const T* g, const T* x, T* dk, const DepthwiseShape& s);

}  // namespace diffnet::ops::cpu
