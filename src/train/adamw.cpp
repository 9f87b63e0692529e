// AdamW (decoupled weight decay), PyTorch's update rule, with named state tensors for checkpoints.
#include <c10/core/GradMode.h>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "diffnet/common.h"
#include "diffnet/train.h"

namespace diffnet {

AdamW::AdamW(std::vector<Param> params, double beta1, double beta2, double eps)
    : params_(std::move(params)), beta1_(beta1), beta2_(beta2), eps_(eps) {
  for (const auto& p : params_) {
    exp_avg_.push_back(at::zeros_like(p.value, at::MemoryFormat::Preserve));
    exp_avg_sq_.push_back(at::zeros_like(p.value, at::MemoryFormat::Preserve));
    steps_.push_back(0);
  }
}

void AdamW::step(double lr_in) {
  c10::NoGradGuard no_grad;
  // Parameters that take the same update (same step count, weight decay and lr scale) are updated together by
  // multi-tensor (_foreach) kernels: a few launches per group on a GPU instead of ~8 per parameter.
  // The arithmetic is the per-parameter rule: p *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
  // p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
  std::map<std::tuple<int64_t, double, double>, std::vector<size_t>> groups;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].value.grad().defined()) continue;
    groups[{++steps_[i], params_[i].weight_decay, params_[i].lr_scale}].push_back(i);
  }
  for (const auto& [key, idx] : groups) {
    const double t = static_cast<double>(std::get<0>(key)), wd = std::get<1>(key);
    const double lr = lr_in * std::get<2>(key);
    std::vector<at::Tensor> p, g, m, v;
    for (size_t i : idx) {
      p.push_back(params_[i].value);
      g.push_back(params_[i].value.grad());
      m.push_back(exp_avg_[i]);
      v.push_back(exp_avg_sq_[i]);
    }
    const double bc1 = 1.0 - std::pow(beta1_, t), bc2 = 1.0 - std::pow(beta2_, t);
    at::_foreach_mul_(p, 1.0 - lr * wd);
    at::_foreach_mul_(m, beta1_);
    at::_foreach_add_(m, g, 1.0 - beta1_);
    at::_foreach_mul_(v, beta2_);
    at::_foreach_addcmul_(v, g, g, 1.0 - beta2_);
    std::vector<at::Tensor> denom = at::_foreach_sqrt(v);
    at::_foreach_div_(denom, std::sqrt(bc2));
    at::_foreach_add_(denom, eps_);
    at::_foreach_addcdiv_(p, m, denom, -lr / bc1);
  }
}

void AdamW::zero_grad() {
  for (auto& p : params_) {
    if (p.value.grad().defined()) p.value.mutable_grad() = at::Tensor();
  }
}

std::map<std::string, at::Tensor> AdamW::state() const {
  std::map<std::string, at::Tensor> s;
  for (size_t i = 0; i < params_.size(); ++i) {
    s[params_[i].name + ".exp_avg"] = exp_avg_[i];
    s[params_[i].name + ".exp_avg_sq"] = exp_avg_sq_[i];
    s[params_[i].name + ".step"] = at::full({1}, steps_[i], at::kLong);
  }
  return s;
}

void AdamW::load_state(const std::map<std::string, at::Tensor>& s) {
  auto get = [&](const std::string& key, const at::IntArrayRef shape) -> const at::Tensor& {
    auto it = s.find(key);
    if (it == s.end()) throw Error("optimizer state", "missing tensor " + key);
    if (it->second.sizes() != shape) throw Error("optimizer state", "tensor " + key + " has the wrong shape");
    return it->second;
  };
  c10::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& n = params_[i].name;
    exp_avg_[i].copy_(get(n + ".exp_avg", params_[i].value.sizes()));
    exp_avg_sq_[i].copy_(get(n + ".exp_avg_sq", params_[i].value.sizes()));
    steps_[i] = get(n + ".step", {1}).to(at::kLong).item<int64_t>();
  }
  if (s.size() != 3 * params_.size())
    throw Error("optimizer state", "has " + std::to_string(s.size()) + " tensors, expected " +
                                       std::to_string(3 * params_.size()));
}

}  // namespace diffnet
