// A stride-1 convolution (groups 1, dilation 1, K x K with zero padding P) whose CPU weight gradient is a
// BLAS matrix product over the input's patches, where that was measured faster than LibTorch's (oneDNN's)
// backward-weights pass: with AVX2, oneDNN's took 1.2-1.8x the product's time on most of the model's 1x1
// shapes and 2.2-2.4x on its 3x3 (docs/ops.md, "The convolutions' weight gradient"). Forward and input
// gradient stay LibTorch's.
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace diffnet::ops {

// y = at::conv2d(x, weight (N,C,K,K), bias (N) or undefined, stride 1, padding `padding`). When gradients
// are recorded for a CPU float32 input with a float32 weight, groups 1, K odd and padding (K - 1) / 2, it is
// an autograd function whose backward gives the weight and bias gradients by
// conv_weight_grad_gemm or LibTorch, whichever conv_weight_grad() says, and the input gradient by
// LibTorch; anywhere else (inference, GPU, other dtypes or shapes) it is plain at::conv2d.
at::Tensor conv2d_gemm_grad(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, int64_t padding);

// Whether conv2d_gemm_grad is its autograd function for these arguments right now (see above).
bool conv_gemm_grad_applies(const at::Tensor& x, const at::Tensor& weight, int64_t padding);

// The weight and bias gradients as one matrix product each, for the upstream gradient `grad` (B,N,H,W) and
// the forward input `x` (B,C,H,W), both CPU float32, any layout (channels_last avoids a copy): dweight
// (N,C,K,K) = sum over pixels of grad's N values times the K x K x C patch around the pixel (zeros outside
// the image), dbias (N) = grad summed over B, H, W. The patches are gathered `chunk_pixels` output pixels
// at a time (whole rows of one image; at least one row), so the extra memory is bounded.
std::tuple<at::Tensor, at::Tensor> conv_weight_grad_gemm(const at::Tensor& grad, const at::Tensor& x, int64_t K,
                                                         int64_t padding, int64_t chunk_pixels = 4096);

// Which weight gradient the autograd function uses in this process: "ours" (the product) or "aten"
// (LibTorch's). Which is faster depends on the CPU (oneDNN's pass is tuned per instruction set), so by
// default ("auto") it is measured once, at the first call: both ways on two of the model's convolutions (a
// block's 1x1, 64 -> 256 channels over 2 x 64 x 64 pixels, and the decoder's 3x3, 64 -> 64, same pixels),
// alternated, the faster total of the best of three rounds wins. $DIFFNET_CONV_WGRAD = auto | aten | ours
// sets the default; set_conv_weight_grad("auto") decides again (that variable, else a new measurement).
// The two ways differ in the last bits, so a training run keeps its choice in its checkpoints and every
// rank takes rank 0's (as the Linear backend).
void set_conv_weight_grad(const std::string& choice);  // "auto" | "aten" | "ours"; Error otherwise
std::string conv_weight_grad();

// `diffnet bench --op conv-grad`: the weight + bias gradient, LibTorch's (oneDNN) against the product, on
// the 1x1 and 3x3 convolutions of an atto 512² batch-2 training step; the median of `iters` after one
// warm-up, alternated per iteration. Prints a table, or one JSON object per case with `json`. Returns 0.
int run_conv_grad_bench(int iters, bool json);

}  // namespace diffnet::ops
