// Multi-level discrepancy transformation (docs/design.md §2.4) and its ablation variants (A0, A14, A18, A19).
#include "model/discrepancy.h"

#include <c10/core/GradMode.h>
#include <cmath>

#include "diffnet/common.h"
#include "diffnet/zero_sum.h"
#include "model/convnext.h"

namespace diffnet::model {

at::Tensor srm_kernels(int64_t K) {
  TORCH_CHECK(K >= 5 && K % 2 == 1, "srm_kernels: K must be odd and >= 5");
  const float f1[25] = {0, 0, 0, 0, 0, 0, -1, 2, -1, 0, 0, 2, -4, 2, 0, 0, -1, 2, -1, 0, 0, 0, 0, 0, 0};
  const float f2[25] = {-1, 2, -2, 2, -1, 2, -6, 8, -6, 2, -2, 8, -12, 8, -2, 2, -6, 8, -6, 2, -1, 2, -2, 2, -1};
  const float f3[25] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, -2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  const float scale[3] = {4.f, 12.f, 2.f};
  const float* f[3] = {f1, f2, f3};
  at::Tensor k = at::zeros({3, K, K});
  const int64_t o = (K - 5) / 2;
  auto a = k.accessor<float, 3>();
  for (int m = 0; m < 3; ++m)
    for (int y = 0; y < 5; ++y)
      for (int x = 0; x < 5; ++x) a[m][o + y][o + x] = f[m][y * 5 + x] / scale[m];
  return k;
}

void FilterBank::init(torch::nn::Module& owner, const ModelConfig& cfg, int64_t channels) {
  filter_ = cfg.filter;
  activation_ = cfg.activation;
  impl_ = cfg.disc_impl;
  channels_ = channels;
  num_filters_ = cfg.num_filters;
  n_free_ = cfg.num_free_filters();
  K_ = cfg.kernel_size;
  const int64_t C = channels, M = num_filters_, KK = K_ * K_;
  if (filter_ == "srm") {
    srm = owner.register_buffer("srm", srm_kernels(K_));
  } else {
    theta = owner.register_parameter("theta", torch::zeros({C, M, filter_ == "free" ? KK : KK - 1}));
    trunc_normal_(theta, 0.02);
  }
  // Fan-in-aware projection init U(-1/sqrt(M), 1/sqrt(M)), bias 0 (docs/design.md §2.4).
  const double bound = 1.0 / std::sqrt(static_cast<double>(M));
  proj_weight = owner.register_parameter("proj_weight", torch::empty({C, M}).uniform_(-bound, bound));
  proj_bias = owner.register_parameter("proj_bias", torch::zeros({C}));
}

at::Tensor FilterBank::kernels() const {
  const int64_t C = channels_, M = num_filters_, K = K_;
  if (filter_ == "zero_sum") return ops::zero_sum_kernels(theta, n_free_);
  if (filter_ == "free") return theta.view({C, M, K, K});
  if (filter_ == "bayar") {
    // Bayar & Stamm's constraint (centre -1, neighbours summing to 1) as a reparameterisation:
    // a = |theta| / sum|theta|, so the constraint holds exactly at every step.
    at::Tensor a = theta.abs();
    a = a / (a.sum(2, /*keepdim=*/true) + 1e-12);
    return ops::zero_sum_kernels(a, M);
  }
  return srm.unsqueeze(0).expand({C, 3, K, K});  // srm
}

at::Tensor FilterBank::forward(const at::Tensor& x, bool training) {
  if (proj_weight.scalar_type() == at::kBFloat16 || proj_weight.scalar_type() == at::kHalf) {
    // Reduced-precision models (--precision bf16): the filters run in float32 (their responses are
    // differences of nearly equal sums), on float copies of the parameters.
    FilterBank f32 = *this;
    if (theta.defined()) f32.theta = theta.to(at::kFloat);
    if (srm.defined()) f32.srm = srm.to(at::kFloat);
    f32.proj_weight = proj_weight.to(at::kFloat);
    f32.proj_bias = proj_bias.to(at::kFloat);
    f32.cache_ = at::Tensor();
    return f32.forward(x.to(at::kFloat), training).to(x.scalar_type());
  }
  const int64_t C = channels_, M = num_filters_;
  const bool inference = !training && !c10::GradMode::is_enabled();
  const std::string impl = ops::zero_sum_impl_for(filter_, activation_, impl_, explicit_impl_, inference);
  // Under autocast the fused op runs bf16 input in float32 itself; the dense filters are run so here.
  if (impl == "dense" && (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf))
    return forward(x.to(at::kFloat), training).to(x.scalar_type());
  if (filter_ == "zero_sum" && (impl == "fused" || !inference))
    return ops::zero_sum(x, theta, proj_weight, proj_bias, n_free_, impl, activation_);
  at::Tensor k;
  if (inference) {
    const at::Tensor& src = filter_ == "srm" ? srm : theta;
    const int64_t version = static_cast<int64_t>(src._version());
    if (!cache_.defined() || cache_version_ != version || cache_ptr_ != src.data_ptr() ||
        cache_.device() != src.device()) {
      cache_ = kernels().contiguous();
      cache_version_ = version;
      cache_ptr_ = src.data_ptr();
    }
    k = cache_;
  } else {
    cache_ = at::Tensor();
    k = kernels();
  }
  at::Tensor u = ops::depthwise_multi(x, k.to(x.scalar_type()));
  if (activation_ == "abs") u = u.abs();
  else if (activation_ == "tanh") u = u.tanh();
  return (u * proj_weight.view({1, C, M, 1, 1})).sum(2) + proj_bias.view({1, C, 1, 1});
}

DiscrepancyImpl::DiscrepancyImpl(const ModelConfig& cfg, int64_t in_channels) {
  reduce = register_module("reduce", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, cfg.disc_dim, 1)));
  init_conv_linear(*this);
  has_bank = !cfg.disc_on_input;
  if (has_bank) bank.init(*this, cfg, cfg.disc_dim);
}

at::Tensor DiscrepancyImpl::forward(const at::Tensor& x) {
  at::Tensor r = pointwise_conv(x, reduce->weight, reduce->bias);
  return has_bank ? bank.forward(r, is_training()) : r;
}

InputFiltersImpl::InputFiltersImpl(const ModelConfig& cfg, int64_t stem_channels) {
  embed = register_module("embed", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, stem_channels, 4).stride(4)));
  init_conv_linear(*this);
  bank.init(*this, cfg, 3);
}

at::Tensor InputFiltersImpl::forward(const at::Tensor& rgb) {
  return embed->forward(bank.forward(rgb, is_training()).contiguous(at::MemoryFormat::ChannelsLast));
}

}  // namespace diffnet::model
