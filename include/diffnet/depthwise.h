// The depthwise K x K convolution of the ConvNeXt blocks (stride 1, zero padding K/2, groups = channels)
// with our own CPU backward: LibTorch 1.13's (oneDNN) backward for it takes ~10x its forward on the CPU
// (docs/ops.md, "The depthwise convolution's backward").
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace diffnet::ops {

// y = at::conv2d(x, weight (C,1,K,K), bias (C) or undefined, stride 1, padding K/2, groups C), K odd <= 9.
// The forward is always at::conv2d. When gradients are recorded for a CPU float32/float64 input, the
// backward is depthwise_conv_backward below instead of LibTorch's; anywhere else (GPU, inference, other
// dtypes) this is plain at::conv2d. $DIFFNET_DEPTHWISE=aten keeps LibTorch's backward (A/B runs).
at::Tensor depthwise_conv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// The backward alone, for the upstream gradient `grad` and the forward input `x` (B,C,H,W, CPU,
// float32/float64, any layout): (dx, undefined unless need_dx), dweight (C,1,K,K), dbias (C).
std::tuple<at::Tensor, at::Tensor, at::Tensor> depthwise_conv_backward(const at::Tensor& grad, const at::Tensor& x,
                                                                        const at::Tensor& weight, bool need_dx);

// Whether depthwise_conv uses our backward for these arguments right now (see above).
bool depthwise_uses_own_backward(const at::Tensor& x, const at::Tensor& weight);

// Inference, fused: LayerNorm over the channels (weight ln_weight, bias ln_bias, eps) of depthwise_conv
// (K = 7, with bias) of x (B,C,H,W channels_last), returned as the (B,H,W,C) contiguous tensor the blocks'
// Linear layers take; the convolution never exists as a whole tensor (cpu/depthwise_kernel.h). Needs no
// gradient recorded, a float32 or bf16 CPU input with weight and bias of its dtype (the result has it too;
// the arithmetic is float32), K = 7 and C a multiple of 4 (an Error otherwise); the blocks call it where
// depthwise_layer_norm_applies says so, and otherwise depthwise_conv + LayerNorm.
at::Tensor depthwise_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                const at::Tensor& ln_weight, const at::Tensor& ln_bias, double eps);

// Whether the blocks use depthwise_layer_norm for these arguments: what it needs, a channel count for which
// the kernels' instruction-set level in use was measured faster than LibTorch's path (AVX-512: a pixel's
// channels not a multiple of 1 KB long, i.e. C not a multiple of 256 in float32, of 512 in bf16; AVX2:
// C < 128; SSE: never), and $DIFFNET_DWLN not "aten" (A/B runs).
bool depthwise_layer_norm_applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// `diffnet bench --op depthwise`: forward + backward (input, weight and bias gradients) through autograd,
// LibTorch's backward against ours, on the block shapes of atto (512², batch 2) and base (768², batch 1),
// channels_last float32 on the CPU; the median of `iters` after one warm-up, alternating the two per
// iteration. Prints a table, or one JSON object per case with `json`. Returns 0.
int run_depthwise_bench(int iters, bool json);

}  // namespace diffnet::ops
