// AdamW (decoupled weight decay), PyTorch's update rule, with named state tensors for checkpoints.
#include <cmath>

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

void AdamW::step(double lr) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor p = params_[i].value;
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    int64_t t = ++steps_[i];
    p.mul_(1.0 - lr * params_[i].weight_decay);
    exp_avg_[i].mul_(beta1_).add_(g, 1.0 - beta1_);
    exp_avg_sq_[i].mul_(beta2_).addcmul_(g, g, 1.0 - beta2_);
    double bc1 = 1.0 - std::pow(beta1_, static_cast<double>(t));
    double bc2 = 1.0 - std::pow(beta2_, static_cast<double>(t));
    at::Tensor denom = (exp_avg_sq_[i].sqrt() / std::sqrt(bc2)).add_(eps_);
    p.addcdiv_(exp_avg_[i], denom, -lr / bc1);
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
  at::NoGradGuard no_grad;
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
