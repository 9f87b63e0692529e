// ConvNeXt-V2 building blocks (docs/design.md §2.1) with timm's module names, computing on channels_last
// activations: convs see NCHW tensors in NHWC memory, LayerNorm/Linear/GRN run on free NHWC views.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace diffnet::model {

// Truncated normal N(0, std) restricted to [a, b] in place (timm's trunc_normal_ bounds: +-2 absolute).
void trunc_normal_(at::Tensor& w, double std, double a = -2.0, double b = 2.0);

// trunc_normal(std) for every Conv2d/Linear weight below `module`, zero biases (ConvNeXt-V2 init).
void init_conv_linear(torch::nn::Module& module, double std = 0.02);

// LayerNorm over the last dimension; activations whose dtype differs from the weights' (bf16 under
// autocast) are normalised in the weights' dtype (float32), so the result is float32 then.
at::Tensor layer_norm_last(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps);

// LayerNorm over the channels of an NCHW tensor (biased variance over C, eps 1e-6); returns channels_last.
class LayerNorm2dImpl : public torch::nn::Module {
 public:
  explicit LayerNorm2dImpl(int64_t channels, double eps = 1e-6);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight, bias;

 private:
  int64_t channels_;
  double eps_;
};
TORCH_MODULE(LayerNorm2d);

// Global Response Norm on NHWC input (timm GlobalResponseNorm, weight/bias (C,), zero init):
// Gx = sqrt(sum_HW x^2), Nx = Gx / (mean_C Gx + 1e-6), y = x + bias + weight * (x * Nx).
// The MLP applies it to gelu(h) only, so it takes h and applies both (ops::gelu_grn: one fused op).
class GrnImpl : public torch::nn::Module {
 public:
  explicit GrnImpl(int64_t channels);
  at::Tensor forward_after_gelu(const at::Tensor& h);  // GRN(gelu(h))
  at::Tensor weight, bias;
};
TORCH_MODULE(Grn);

// A 1x1 convolution of x (B,C,H,W) (weight (O,C,1,1), bias (O) or undefined), any memory format: by oneDNN
// for float32 CPU tensors (at::conv2d sends small batches of 1x1 convolutions on one thread to an
// im2col + BLAS path, 2-3x slower here), else at::conv2d. Differentiable.
at::Tensor pointwise_conv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// y = x W^T + b on NHWC activations x (B,H,W,C_in), by the linear backend (model.h: BLAS Linear, or a
// 1x1 oneDNN convolution on the channels_last view when x is a contiguous float32 CPU tensor); bf16 on
// the CPU always as the 1x1 convolution (at::conv2d: oneDNN's bf16 kernels where the CPU has them).
at::Tensor linear_nhwc(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// fc1 (C->4C) -> GELU(erf) -> GRN(4C) -> fc2 (4C->C), on NHWC.
class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(int64_t channels, int64_t hidden);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  Grn grn{nullptr};
};
TORCH_MODULE(Mlp);

// Stochastic depth: zeroes whole samples with probability p in training, scales the rest by 1/(1-p).
at::Tensor drop_path(const at::Tensor& x, double p, bool training);

// ConvNeXt-V2 block: x + drop_path(fc2(GRN(GELU(fc1(LN(dwconv7x7(x))))))). Input/output (B,C,H,W).
class ConvNeXtBlockImpl : public torch::nn::Module {
 public:
  explicit ConvNeXtBlockImpl(int64_t channels, double drop_path = 0.0);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Conv2d conv_dw{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  Mlp mlp{nullptr};
  double drop_path_rate = 0.0;
};
TORCH_MODULE(ConvNeXtBlock);

// A ModuleList of blocks named blocks.{j}; forward runs them in order.
torch::nn::ModuleList make_blocks(int64_t channels, int64_t depth, const std::vector<double>& drop_rates = {});
at::Tensor run_blocks(torch::nn::ModuleList& blocks, at::Tensor x);

// stem: "0" conv 4x4/4 (3 -> C0), "1" LayerNorm2d.
class StemImpl : public torch::nn::Module {
 public:
  StemImpl(int64_t in_channels, int64_t out_channels);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Conv2d conv{nullptr};
  LayerNorm2d norm{nullptr};
};
TORCH_MODULE(Stem);

// downsample: "0" LayerNorm2d(C_in), "1" conv 2x2/2 (C_in -> C_out).
class DownsampleImpl : public torch::nn::Module {
 public:
  DownsampleImpl(int64_t in_channels, int64_t out_channels);
  at::Tensor forward(const at::Tensor& x);
  LayerNorm2d norm{nullptr};
  torch::nn::Conv2d conv{nullptr};
};
TORCH_MODULE(Downsample);

// One stage: downsample C_in -> C (stages 1..3; none when in_channels == 0) then blocks.
class StageImpl : public torch::nn::Module {
 public:
  StageImpl(int64_t in_channels, int64_t channels, int64_t depth, const std::vector<double>& drop_rates);
  at::Tensor forward(const at::Tensor& x) { return forward_blocks(forward_downsample(x)); }
  at::Tensor forward_downsample(const at::Tensor& x);
  at::Tensor forward_blocks(const at::Tensor& x);
  Downsample downsample{nullptr};
  torch::nn::ModuleList blocks{nullptr};
};
TORCH_MODULE(Stage);

// ConvNeXt-V2 without head: stem + 4 stages, timm names (stem.{0,1}, stages.{i}.downsample.{0,1},
// stages.{i}.blocks.{j}.*). drop_path_rate grows linearly over all blocks.
class ConvNeXtV2Impl : public torch::nn::Module {
 public:
  ConvNeXtV2Impl(const std::vector<int64_t>& dims, const std::vector<int64_t>& depths,
                 double drop_path_rate = 0.0, int64_t in_channels = 3);
  // The 4 stage outputs F1..F4 (strides 4, 8, 16, 32).
  std::vector<at::Tensor> forward(const at::Tensor& x);
  Stem stem{nullptr};
  std::vector<Stage> stages;
};
TORCH_MODULE(ConvNeXtV2);

}  // namespace diffnet::model
