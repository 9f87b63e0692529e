// Global response normalisation (GRN) of the ConvNeXt-V2 MLP, with a fused CPU forward and backward:
// LibTorch 1.13 runs the composite formula as ~5 elementwise passes forward and more backward over the
// largest activations of the block (4x the channels; docs/ops.md, "GRN").
#pragma once

#include <ATen/ATen.h>

namespace diffnet::ops {

// x (B, H, W, C), channel innermost (NHWC); weight, bias (C):
//   gx[b,c] = sqrt(sum over h,w of x^2),  nx = gx / (mean over c of gx + 1e-6),  y = x + weight * (x * nx) + bias.
// CPU float32/float64 (x, weight and bias alike): two passes forward (sums of squares, output) and two
// backward (two sums, input gradient), sums over fixed blocks added in double (same bits for any thread
// count); once differentiable. bf16 activations on the CPU without gradient (inference of a bf16 model;
// weights bf16 or float32): the same two forward passes on bf16 storage with float32 arithmetic and
// statistics. Anywhere else (GPU, half, bf16 with gradient, mixed dtypes) and with $DIFFNET_GRN=aten:
// grn_composite. A channel that is all zero gets a zero input gradient through gx
// (the composite's sqrt gives NaN there).
at::Tensor grn(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// The same formula as LibTorch operations (differentiable by autograd, any device). Reduced-precision
// activations (bf16, half) take the statistics and the output in float32 and return their own dtype.
at::Tensor grn_composite(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// Whether grn() uses the fused CPU kernel for these arguments (see above).
bool grn_uses_own_kernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// grn(gelu(h), weight, bias) with GELU in its erf form, as the ConvNeXt-V2 MLP applies them. Where grn()
// takes its fused kernel (and $DIFFNET_GELU_GRN is not "aten"), the GELU is computed inside GRN's passes:
// forward, the first pass writes g = gelu(h) and sums g^2; backward, the input pass takes GRN's gradient
// through the GELU, so the GELU costs no pass of its own either way. float32 GELU: Abramowitz & Stegun's
// erf (absolute error <= 1.5e-7, as ATen's vectorised one) in vectorised arithmetic; float64: std::erf.
// Elsewhere: grn(at::gelu(h), weight, bias).
at::Tensor gelu_grn(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias);
bool gelu_grn_uses_own_kernel(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias);

// `diffnet bench --op grn`: forward, and forward + backward through autograd: GRN, composite against
// fused; then at::gelu followed by grn() against gelu_grn(); on the MLP shapes of atto (512², batch 2) and
// base (768², batch 1), float32 on the CPU; the median of `iters` after one warm-up, alternating the two
// per iteration. A table, or JSON lines with `json`.
int run_grn_bench(int iters, bool json);

}  // namespace diffnet::ops
