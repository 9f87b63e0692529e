// ConvNeXt-V2 building blocks (docs/design.md §2.1).
#include "model/convnext.h"

#include <ATen/Config.h>

#include <algorithm>
#include <cstdlib>

#include "common/measured_choice.h"
#include "diffnet/common.h"
#include "diffnet/conv_grad.h"
#include "diffnet/depthwise.h"
#include "diffnet/grn.h"
#include "diffnet/model.h"


namespace diffnet::model {

void trunc_normal_(at::Tensor& w, double std, double a, double b) {
  // Rejection sampling: draw N(0, std) and redraw the values outside [a, b] (none in practice for the
  // 0.02 std used here; the inverse-CDF method with erfinv costs ~5x more on large models).
  torch::NoGradGuard no_grad;
  w.normal_(0.0, std);
  for (int round = 0; round < 100; ++round) {
    at::Tensor out = (w < a).logical_or_(w > b);
    const int64_t n = out.sum().item<int64_t>();
    if (n == 0) return;
    w.masked_scatter_(out, at::empty({n}, w.options()).normal_(0.0, std));
  }
  w.clamp_(a, b);
}

void init_conv_linear(torch::nn::Module& module, double std) {
  torch::NoGradGuard no_grad;
  auto init_one = [std](torch::nn::Module& m) {
    if (auto* conv = m.as<torch::nn::Conv2dImpl>()) {
      trunc_normal_(conv->weight, std);
      if (conv->bias.defined()) conv->bias.zero_();
    } else if (auto* fc = m.as<torch::nn::LinearImpl>()) {
      trunc_normal_(fc->weight, std);
      if (fc->bias.defined()) fc->bias.zero_();
    }
  };
  init_one(module);  // modules() cannot include a module still under construction
  for (auto& m : module.modules(/*include_self=*/false)) init_one(*m);
}

LayerNorm2dImpl::LayerNorm2dImpl(int64_t channels, double eps) : channels_(channels), eps_(eps) {
  weight = register_parameter("weight", torch::ones({channels}));
  bias = register_parameter("bias", torch::zeros({channels}));
}

at::Tensor layer_norm_last(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  // bf16 activations with float32 weights (autocast): normalise in float32, as CUDA autocast does by
  // itself; LibTorch 1.13's CPU autocast leaves layer_norm alone and it would reject the mixed dtypes.
  // A bf16 model on the CPU: in float32 too, back to bf16 (LibTorch 1.13's bf16 CPU layer_norm is ~10x
  // slower than its float32 one plus the two conversions).
  if (x.scalar_type() == at::kBFloat16 && weight.scalar_type() == at::kBFloat16 && x.is_cpu())
    return at::layer_norm(x.to(at::kFloat), {x.size(-1)}, weight.to(at::kFloat), bias.to(at::kFloat), eps)
        .to(at::kBFloat16);
  const at::Tensor xs = x.scalar_type() == weight.scalar_type() ? x : x.to(weight.scalar_type());
  return at::layer_norm(xs, {x.size(-1)}, weight, bias, eps);
}

at::Tensor LayerNorm2dImpl::forward(const at::Tensor& x) {
  // channels_last memory makes the NHWC permute a free view; layer_norm over C = biased variance over C.
  at::Tensor y = layer_norm_last(x.permute({0, 2, 3, 1}), weight, bias, eps_);
  return y.permute({0, 3, 1, 2});
}

GrnImpl::GrnImpl(int64_t channels) {
  weight = register_parameter("weight", torch::zeros({channels}));
  bias = register_parameter("bias", torch::zeros({channels}));
}

at::Tensor GrnImpl::forward_after_gelu(const at::Tensor& h) { return ops::gelu_grn(h, weight, bias); }

at::Tensor pointwise_conv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  // Training: the same forward, and the weight gradient where a matrix product was measured faster.
  if (ops::conv_gemm_grad_applies(x, weight, 0)) return ops::conv2d_gemm_grad(x, weight, bias, 0);
#if AT_MKLDNN_ENABLED()
  if (x.dim() == 4 && x.is_cpu() && !x.is_mkldnn() && x.scalar_type() == at::kFloat &&
      weight.scalar_type() == at::kFloat && at::globalContext().userEnabledMkldnn())
    return at::mkldnn_convolution(x, weight, bias, {0, 0}, {1, 1}, {1, 1}, 1);
#endif
  return at::conv2d(x, weight, bias);
}

namespace {

enum class LinearPath { kUnset, kBlas, kOnednn };

at::Tensor linear_as_conv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const at::Tensor y = pointwise_conv(x.permute({0, 3, 1, 2}), weight.view({weight.size(0), weight.size(1), 1, 1}), bias);
  return y.permute({0, 2, 3, 1});
}

// Times both paths on a block-sized product (1 x 32 x 32 x 256 -> 1024, fixed values: no random draws,
// which would move the seeded generator), alternated, best of three each; the faster one wins.
LinearPath measure_linear() {
  torch::NoGradGuard no_grad;
  const at::Tensor x = at::full({1, 32, 32, 256}, 0.01f);
  const at::Tensor w = at::full({1024, 256}, 0.01f), b = at::zeros({1024});
  double best[2] = {1e9, 1e9};
  for (int rep = 0; rep < 4; ++rep)
    for (int path = 0; path < 2; ++path) {
      const double t0 = now_seconds();
      at::Tensor y = path == 0 ? at::linear(x, w, b) : linear_as_conv(x, w, b);
      const double dt = now_seconds() - t0;
      if (rep > 0) best[path] = std::min(best[path], dt);  // the first round warms up both
    }
  return best[1] < best[0] ? LinearPath::kOnednn : LinearPath::kBlas;
}

LinearPath parse_linear(const std::string& choice, const char* what) {
  if (choice == "auto") return LinearPath::kUnset;
  if (choice == "blas") return LinearPath::kBlas;
  if (choice == "onednn") return LinearPath::kOnednn;
  throw Error(what, "'" + choice + "' is not one of auto, blas, onednn");
}

MeasuredChoice<LinearPath> g_linear("DIFFNET_LINEAR", parse_linear, measure_linear);

LinearPath linear_path() { return g_linear.get(); }

}  // namespace

at::Tensor linear_nhwc(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const bool conv_applies = x.dim() == 4 && x.is_cpu() && x.scalar_type() == at::kFloat &&
                            weight.scalar_type() == at::kFloat && x.is_contiguous();
  if (conv_applies && linear_path() == LinearPath::kOnednn) return linear_as_conv(x, weight, bias);
  // bf16 (a bf16 model on the CPU): always as a 1x1 convolution, which LibTorch gives oneDNN's bf16
  // kernels where the CPU has them; its bf16 BLAS product was as fast to 6x slower (docs/model.md).
  if (x.dim() == 4 && x.is_cpu() && x.scalar_type() == at::kBFloat16 && weight.scalar_type() == at::kBFloat16)
    return linear_as_conv(x.contiguous(), weight, bias);
  return at::linear(x, weight, bias);
}

MlpImpl::MlpImpl(int64_t channels, int64_t hidden) {
  fc1 = register_module("fc1", torch::nn::Linear(channels, hidden));
  grn = register_module("grn", Grn(hidden));
  fc2 = register_module("fc2", torch::nn::Linear(hidden, channels));
}

at::Tensor MlpImpl::forward(const at::Tensor& x) {
  const at::Tensor h = linear_nhwc(x, fc1->weight, fc1->bias);
  return linear_nhwc(grn->forward_after_gelu(h).contiguous(), fc2->weight, fc2->bias);
}

at::Tensor drop_path(const at::Tensor& x, double p, bool training) {
  if (!training || p <= 0.0) return x;
  const double keep = 1.0 - p;
  at::Tensor mask = at::empty({x.size(0), 1, 1, 1}, x.options()).bernoulli_(keep).div_(keep);
  return x * mask;
}

ConvNeXtBlockImpl::ConvNeXtBlockImpl(int64_t channels, double drop_path) : drop_path_rate(drop_path) {
  conv_dw = register_module(
      "conv_dw", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, channels, 7).padding(3).groups(channels)));
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({channels}).eps(1e-6)));
  mlp = register_module("mlp", Mlp(channels, 4 * channels));
}

at::Tensor ConvNeXtBlockImpl::forward(const at::Tensor& x) {
  const at::Tensor xc = x.contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor y;
  if (ops::depthwise_layer_norm_applies(xc, conv_dw->weight, conv_dw->bias)) {  // inference on the CPU, fused
    y = ops::depthwise_layer_norm(xc, conv_dw->weight, conv_dw->bias, norm->weight, norm->bias, norm->options.eps());
  } else {
    y = ops::depthwise_conv(xc, conv_dw->weight, conv_dw->bias).permute({0, 2, 3, 1});  // NHWC view (free)
    y = layer_norm_last(y, norm->weight, norm->bias, norm->options.eps());
  }
  y = mlp->forward(y);
  y = y.permute({0, 3, 1, 2});
  return x + drop_path(y, drop_path_rate, is_training());
}

torch::nn::ModuleList make_blocks(int64_t channels, int64_t depth, const std::vector<double>& drop_rates) {
  torch::nn::ModuleList blocks;
  for (int64_t j = 0; j < depth; ++j)
    blocks->push_back(ConvNeXtBlock(channels, j < static_cast<int64_t>(drop_rates.size()) ? drop_rates[j] : 0.0));
  return blocks;
}

at::Tensor run_blocks(torch::nn::ModuleList& blocks, at::Tensor x) {
  for (const auto& b : *blocks) x = b->as<ConvNeXtBlockImpl>()->forward(x);
  return x;
}

StemImpl::StemImpl(int64_t in_channels, int64_t out_channels) {
  conv = register_module("0", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, out_channels, 4).stride(4)));
  norm = register_module("1", LayerNorm2d(out_channels));
}

at::Tensor StemImpl::forward(const at::Tensor& x) {
  return norm->forward(conv->forward(x.contiguous(at::MemoryFormat::ChannelsLast)));
}

DownsampleImpl::DownsampleImpl(int64_t in_channels, int64_t out_channels) {
  norm = register_module("0", LayerNorm2d(in_channels));
  conv = register_module("1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, out_channels, 2).stride(2)));
}

at::Tensor DownsampleImpl::forward(const at::Tensor& x) { return conv->forward(norm->forward(x)); }

StageImpl::StageImpl(int64_t in_channels, int64_t channels, int64_t depth, const std::vector<double>& drop_rates) {
  if (in_channels > 0) downsample = register_module("downsample", Downsample(in_channels, channels));
  blocks = register_module("blocks", make_blocks(channels, depth, drop_rates));
}

at::Tensor StageImpl::forward_downsample(const at::Tensor& x) {
  return downsample ? downsample->forward(x) : x;
}

at::Tensor StageImpl::forward_blocks(const at::Tensor& x) { return run_blocks(blocks, x); }

ConvNeXtV2Impl::ConvNeXtV2Impl(const std::vector<int64_t>& dims, const std::vector<int64_t>& depths,
                               double drop_path_rate, int64_t in_channels) {
  TORCH_CHECK(dims.size() == 4 && depths.size() == 4, "ConvNeXtV2: 4 dims and 4 depths expected");
  stem = register_module("stem", Stem(in_channels, dims[0]));
  int64_t total = 0;
  for (int64_t d : depths) total += d;
  torch::nn::ModuleList list;
  int64_t idx = 0;
  for (size_t i = 0; i < 4; ++i) {
    std::vector<double> rates;
    for (int64_t j = 0; j < depths[i]; ++j, ++idx)
      rates.push_back(total > 1 ? drop_path_rate * static_cast<double>(idx) / static_cast<double>(total - 1) : 0.0);
    Stage s(i == 0 ? 0 : dims[i - 1], dims[i], depths[i], rates);
    stages.push_back(s);
    list->push_back(s);
  }
  register_module("stages", list);
}

std::vector<at::Tensor> ConvNeXtV2Impl::forward(const at::Tensor& x) {
  std::vector<at::Tensor> feats;
  at::Tensor y = stem->forward(x);
  for (auto& s : stages) {
    y = s->forward(y);
    feats.push_back(y);
  }
  return feats;
}

}  // namespace diffnet::model

namespace diffnet {

void set_linear_backend(const std::string& choice) {
  const model::LinearPath p = model::parse_linear(choice, "linear backend");
  model::g_linear.set(p);
}

std::string linear_backend() { return model::linear_path() == model::LinearPath::kOnednn ? "onednn" : "blas"; }

}  // namespace diffnet
