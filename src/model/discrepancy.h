// Multi-level discrepancy transformation (docs/design.md §2.4): T = phi(r(F)), r a 1x1 conv C_s -> D, phi per channel
// M depthwise KxK filters (zero-sum by default; free / SRM / Bayar for the ablations), activation, and a
// per-channel projection back to one map.
#pragma once

#include <torch/torch.h>

#include <string>

#include "diffnet/config.h"

namespace diffnet::model {

// Fixed SRM residual filters (A14): 3 zero-sum 5x5 kernels (the 3x3 ones centred), embedded in KxK.
at::Tensor srm_kernels(int64_t K);

// The filter bank phi on C channels, registered on its owner as theta (or the srm buffer), proj_weight (C,M)
// and proj_bias (C). theta: zero_sum / bayar (C,M,K*K-1), free (C,M,K*K).
class FilterBank {
 public:
  void init(torch::nn::Module& owner, const ModelConfig& cfg, int64_t channels);
  // x (B,C,H,W) -> (B,C,H,W), fused or dense as ops::zero_sum_impl_for decides (set_impl forces the
  // choice). Dense inference caches its materialised kernels (recomputed when theta changes: version
  // counter or storage).
  at::Tensor forward(const at::Tensor& x, bool training);
  // Materialised kernels (C,M,K,K) from the current parameters.
  at::Tensor kernels() const;
  void set_impl(const std::string& impl) {
    impl_ = impl;
    explicit_impl_ = true;
  }

  at::Tensor theta, srm, proj_weight, proj_bias;

 private:
  std::string filter_, activation_, impl_;
  bool explicit_impl_ = false;
  int64_t channels_ = 0, num_filters_ = 0, n_free_ = 0, K_ = 0;
  at::Tensor cache_;
  int64_t cache_version_ = -1;
  const void* cache_ptr_ = nullptr;
};

// disc.{s}: reduce (1x1 conv C_s -> D) then the filter bank (A19: the bank moves to the input, reduce only).
class DiscrepancyImpl : public torch::nn::Module {
 public:
  DiscrepancyImpl(const ModelConfig& cfg, int64_t in_channels);
  at::Tensor forward(const at::Tensor& x);
  void set_impl(const std::string& impl) { bank.set_impl(impl); }
  torch::nn::Conv2d reduce{nullptr};
  FilterBank bank;
  bool has_bank = true;
};
TORCH_MODULE(Discrepancy);

// A19 (interpretation): the filter bank applied to the normalised RGB input (3 channels) as an extra input
// modality; its response is embedded by its own 4x4/4 conv ("embed", 3 -> C0) and added to the stem output.
class InputFiltersImpl : public torch::nn::Module {
 public:
  InputFiltersImpl(const ModelConfig& cfg, int64_t stem_channels);
  at::Tensor forward(const at::Tensor& rgb);
  void set_impl(const std::string& impl) { bank.set_impl(impl); }
  FilterBank bank;
  torch::nn::Conv2d embed{nullptr};
};
TORCH_MODULE(InputFilters);

}  // namespace diffnet::model
