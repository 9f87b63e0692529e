// Autograd wrapper of the fused zero-sum operator: saves (x, theta, weight) and recomputes the responses
// in backward (they are never stored).
#include <torch/csrc/autograd/custom_function.h>

#include "diffnet/common.h"
#include "diffnet/zero_sum.h"
#include "ops/zero_sum/zero_sum_impl.h"

namespace diffnet::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct ZeroSumFusedFunction : public torch::autograd::Function<ZeroSumFusedFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& theta,
                            const at::Tensor& weight, const at::Tensor& bias, int64_t n_free) {
    // channels_last input: converted once; the NCHW copy is what backward reads, and outputs go back to
    // channels_last (out here, dx in backward).
    const bool cl = detail::is_channels_last(x);
    at::Tensor xk = detail::to_planes(x);
    at::Tensor kern = detail::full_kernels(theta, n_free);
    at::Tensor out = detail::fused_forward(xk, kern, weight, bias);
    ctx->save_for_backward({xk, theta, weight});
    ctx->saved_data["n_free"] = n_free;
    ctx->saved_data["channels_last"] = cl;
    return detail::to_layout(out, cl);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &theta = saved[1], &weight = saved[2];
    const int64_t n_free = ctx->saved_data["n_free"].toInt();
    const bool cl = ctx->saved_data["channels_last"].toBool();
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    at::Tensor g = detail::to_planes(grads[0]);
    at::Tensor kern = detail::full_kernels(theta, n_free);
    std::vector<at::Tensor> r = detail::fused_backward(x, g, kern, weight, ctx->needs_input_grad(0));
    if (r[0].defined()) r[0] = detail::to_layout(r[0], cl);
    at::Tensor dtheta = ctx->needs_input_grad(1) ? detail::theta_grad(r[1], theta, n_free) : at::Tensor();
    return {r[0], dtheta, ctx->needs_input_grad(2) ? r[2] : at::Tensor(),
            ctx->needs_input_grad(3) ? r[3] : at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor zero_sum_fused(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                          const at::Tensor& bias, int64_t n_free) {
  detail::check_fused_args(x, theta, weight, bias);
  if (n_free < 0 || n_free > theta.size(1))
    throw Error("zero_sum", "n_free " + std::to_string(n_free) + " outside [0, " + std::to_string(theta.size(1)) + "]");
  return ZeroSumFusedFunction::apply(x, theta, weight, bias, n_free);
}

}  // namespace diffnet::ops
