// The fused zero-sum operator as a registered LibTorch op: the schemas, and one kernel per dispatch key
// (CPU, CUDA when compiled in, Autograd, Autocast). A new device or dtype touches its kernel file and the
// registration below, nothing else. The autograd kernel saves (x, theta, weight) and recomputes the
// responses in backward (they are never stored).
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <tuple>

#include "diffnet/common.h"
#include "diffnet/zero_sum.h"
#include "ops/zero_sum/zero_sum_impl.h"

namespace diffnet::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Grads = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

at::Tensor call_forward(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight, const at::Tensor& bias,
                        int64_t n_free) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("diffnet::zero_sum_fused", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         int64_t)>();
  return op.call(x, theta, weight, bias, n_free);
}

Grads call_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                    int64_t n_free, bool need_dx) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("diffnet::_zero_sum_fused_backward", "")
                       .typed<Grads(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                    int64_t, bool)>();
  return op.call(grad, x, theta, weight, n_free, need_dx);
}

struct ZeroSumFusedFunction : public torch::autograd::Function<ZeroSumFusedFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& theta,
                            const at::Tensor& weight, const at::Tensor& bias, int64_t n_free) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    // channels_last input: converted once; the NCHW copy is what backward reads, and outputs go back to
    // channels_last (out here, dx in backward).
    const bool cl = detail::is_channels_last(x);
    at::Tensor xk = detail::to_planes(x);
    at::Tensor out = call_forward(xk, theta, weight, bias, n_free);
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
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [dx, dtheta, dweight, dbias] =
        call_backward(detail::to_planes(grads[0]), x, theta, weight, n_free, ctx->needs_input_grad(0));
    if (dx.defined()) dx = detail::to_layout(dx, cl);
    return {dx, ctx->needs_input_grad(1) ? dtheta : at::Tensor(), ctx->needs_input_grad(2) ? dweight : at::Tensor(),
            ctx->needs_input_grad(3) ? dbias : at::Tensor(), at::Tensor()};
  }
};

at::Tensor fused_autograd(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                          const at::Tensor& bias, int64_t n_free) {
  // Without a gradient to compute (inference), the CPU kernel takes channels_last input as it is and
  // returns channels_last, and nothing is saved.
  const bool grad = at::GradMode::is_enabled() &&
                    (x.requires_grad() || theta.requires_grad() || weight.requires_grad() || bias.requires_grad());
  if (!grad && x.is_cpu()) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_forward(x, theta, weight, bias, n_free);
  }
  return ZeroSumFusedFunction::apply(x, theta, weight, bias, n_free);
}

// Autocast (CPU and CUDA): the filters' responses are differences of nearly equal sums, so the op runs in
// float32 whatever the autocast dtype, and returns float32 (the policy of ops autocast keeps in fp32).
at::Tensor fused_autocast(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                          const at::Tensor& bias, int64_t n_free) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  auto f32 = [](const at::Tensor& t) {
    return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf ? t.to(at::kFloat) : t;
  };
  return call_forward(f32(x), f32(theta), f32(weight), f32(bias), n_free);
}

}  // namespace

TORCH_LIBRARY(diffnet, m) {
  m.def("zero_sum_fused(Tensor x, Tensor theta, Tensor weight, Tensor bias, int n_free) -> Tensor");
  m.def("_zero_sum_fused_backward(Tensor grad, Tensor x, Tensor theta, Tensor weight, int n_free, bool need_dx)"
        " -> (Tensor, Tensor, Tensor, Tensor)");
}

// The device kernels live in other translation units: registered as plain function pointers, not
// TORCH_FN, whose compile-time null check GCC rejects for an external function under
// -fsanitize=address,undefined (`make asan`). One indirect call per operator call.
TORCH_LIBRARY_IMPL(diffnet, CPU, m) {
  m.impl("zero_sum_fused", detail::fused_forward_cpu);
  m.impl("_zero_sum_fused_backward", detail::fused_backward_cpu);
}

#ifdef DIFFNET_WITH_CUDA
TORCH_LIBRARY_IMPL(diffnet, CUDA, m) {
  m.impl("zero_sum_fused", detail::fused_forward_cuda);
  m.impl("_zero_sum_fused_backward", detail::fused_backward_cuda);
}
#endif

TORCH_LIBRARY_IMPL(diffnet, Autograd, m) { m.impl("zero_sum_fused", TORCH_FN(fused_autograd)); }
TORCH_LIBRARY_IMPL(diffnet, AutocastCPU, m) { m.impl("zero_sum_fused", TORCH_FN(fused_autocast)); }
TORCH_LIBRARY_IMPL(diffnet, AutocastCUDA, m) { m.impl("zero_sum_fused", TORCH_FN(fused_autocast)); }

at::Tensor zero_sum_fused(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                          const at::Tensor& bias, int64_t n_free) {
  detail::check_fused_args(x, theta, weight, bias);
  if (n_free < 0 || n_free > theta.size(1))
    throw Error("zero_sum", "n_free " + std::to_string(n_free) + " outside [0, " + std::to_string(theta.size(1)) + "]");
  return call_forward(x, theta, weight, bias, n_free);
}

}  // namespace diffnet::ops
