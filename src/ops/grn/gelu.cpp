// gelu (include/diffnet/gelu.h): our CPU passes (cpu/gelu_kernel.cpp) as an autograd function, at::gelu
// elsewhere.
#include "diffnet/gelu.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include "ops/env_switch.h"
#include "ops/grn/cpu/gelu_kernel.h"
#include "ops/grn/cpu/grn_kernel.h"

namespace diffnet::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool aten_forced() {
  static const bool forced = env_says_aten("DIFFNET_GELU");
  return forced;
}

// h itself when its storage is dense and non-overlapping (any strides), else a contiguous copy: the
// passes walk the storage, and empty_like keeps those strides for the output.
at::Tensor dense(const at::Tensor& h) { return h.is_non_overlapping_and_dense() ? h : h.contiguous(); }

at::Tensor forward_pass(const at::Tensor& hd) {
  at::Tensor y = at::empty_like(hd);
  const int64_t n = hd.numel();
  if (hd.scalar_type() == at::kBFloat16) {
    cpu::gelu_values(reinterpret_cast<const cpu::Bf16*>(hd.data_ptr()), reinterpret_cast<cpu::Bf16*>(y.data_ptr()), n);
    return y;
  }
  AT_DISPATCH_FLOATING_TYPES(hd.scalar_type(), "gelu_forward",
                             [&] { cpu::gelu_values<scalar_t>(hd.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n); });
  return y;
}

struct GeluFunction : public torch::autograd::Function<GeluFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h) {
    const at::Tensor hd = dense(h);
    ctx->save_for_backward({hd});
    return forward_pass(hd);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {at::Tensor()};
    const at::Tensor hd = ctx->get_saved_variables()[0];
    at::Tensor dy = grads[0];
    if (dy.strides() != hd.strides() || !dy.is_non_overlapping_and_dense()) dy = at::empty_like(hd).copy_(dy);
    at::Tensor dh = at::empty_like(hd);
    AT_DISPATCH_FLOATING_TYPES(hd.scalar_type(), "gelu_backward", [&] {
      cpu::gelu_input_grad<scalar_t>(dy.data_ptr<scalar_t>(), hd.data_ptr<scalar_t>(), dh.data_ptr<scalar_t>(),
                                     hd.numel());
    });
    return {dh};
  }
};

bool wants_grad(const at::Tensor& h) { return at::GradMode::is_enabled() && h.requires_grad(); }

}  // namespace

bool gelu_uses_own_kernel(const at::Tensor& h) {
  if (!h.is_cpu() || aten_forced() || h.is_mkldnn() || h.is_sparse()) return false;
  const auto dt = h.scalar_type();
  if (dt == at::kBFloat16) return !wants_grad(h);
  return dt == at::kFloat || dt == at::kDouble;
}

at::Tensor gelu(const at::Tensor& h) {
  RECORD_FUNCTION("diffnet::gelu", std::vector<c10::IValue>({h}));  // named in profiles
  if (!gelu_uses_own_kernel(h)) return at::gelu(h);
  if (wants_grad(h)) return GeluFunction::apply(h);
  return forward_pass(dense(h));
}

}  // namespace diffnet::ops
