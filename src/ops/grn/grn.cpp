// grn (include/diffnet/grn.h): the composite formula, and the fused CPU path (cpu/grn_kernel.cpp passes;
// the (B, C) statistics and their gradient in double with LibTorch operations) as an autograd function.
#include "diffnet/grn.h"

#include <torch/csrc/autograd/custom_function.h>

#include <string>

#include "diffnet/common.h"
#include "ops/env_switch.h"
#include "ops/grn/cpu/grn_kernel.h"

namespace diffnet::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr double kEps = 1e-6;

void check_args(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (x.dim() != 4) throw Error("grn", "input must be (B, H, W, C)");
  const int64_t C = x.size(3);
  if (weight.numel() != C || bias.numel() != C)
    throw Error("grn", "weight and bias must have C = " + std::to_string(C) + " values");
}

bool aten_forced() {
  static const bool forced = env_says_aten("DIFFNET_GRN");
  return forced;
}

cpu::GrnShape shape_of(const at::Tensor& x) { return {x.size(0), x.size(1) * x.size(2), x.size(3)}; }

// The forward on contiguous x: y, and the statistics gx, nx (B, C) in double.
struct Forward {
  at::Tensor y, gx, nx;
};

Forward fused_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const cpu::GrnShape s = shape_of(x);
  const auto f64 = x.options().dtype(at::kDouble);
  at::Tensor ss = at::empty({s.B, s.C}, f64);
  at::Tensor y = at::empty_like(x);
  const at::Tensor w = weight.reshape({s.C}).contiguous(), b = bias.reshape({s.C}).contiguous();
  at::Tensor gx, nx;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grn_forward", [&] {
    cpu::channel_sums<scalar_t>(x.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), ss.data_ptr<double>(), nullptr, s);
    gx = ss.sqrt();
    nx = gx / (gx.mean(1, /*keepdim=*/true) + kEps);
    const at::Tensor a = (1.0 + w.to(at::kDouble) * nx).to(x.scalar_type()).contiguous();
    cpu::channel_affine<scalar_t>(x.data_ptr<scalar_t>(), a.data_ptr<scalar_t>(), nullptr, nullptr,
                                  b.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), s);
  });
  return {y, gx, nx};
}

struct GrnFunction : public torch::autograd::Function<GrnFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias) {
    const at::Tensor xc = x.contiguous();
    Forward f = fused_forward(xc, weight, bias);
    ctx->save_for_backward({xc, weight});
    ctx->saved_data["gx"] = f.gx;
    ctx->saved_data["nx"] = f.nx;
    return f.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor gx = ctx->saved_data["gx"].toTensor(), nx = ctx->saved_data["nx"].toTensor();
    const at::Tensor dy = grads[0].contiguous();
    const cpu::GrnShape s = shape_of(x);
    const auto f64 = x.options().dtype(at::kDouble);
    at::Tensor sdyx = at::empty({s.B, s.C}, f64), sdy = at::empty({s.B, s.C}, f64);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grn_backward_sums", [&] {
      cpu::channel_sums<scalar_t>(dy.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), sdyx.data_ptr<double>(),
                                  sdy.data_ptr<double>(), s);
    });
    const at::Tensor w = weight.reshape({s.C}).to(at::kDouble);
    at::Tensor dx;
    if (ctx->needs_input_grad(0)) {
      // y = x (1 + w nx) + bias; nx_c = gx_c / (m + eps) with m the mean of gx over c; gx = ||x||.
      const at::Tensor A = w * sdyx;                                    // dL/dnx
      const at::Tensor denom = gx.mean(1, /*keepdim=*/true) + kEps;     // (B, 1)
      const at::Tensor dgx = A / denom - (A * gx).sum(1, /*keepdim=*/true) / (denom * denom * static_cast<double>(s.C));
      const at::Tensor k = at::where(gx > 0, dgx / gx.clamp_min(1e-300), at::zeros_like(gx)).to(x.scalar_type()).contiguous();
      const at::Tensor a = (1.0 + w * nx).to(x.scalar_type()).contiguous();
      dx = at::empty_like(x);
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grn_backward_input", [&] {
        cpu::channel_affine<scalar_t>(dy.data_ptr<scalar_t>(), a.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                      k.data_ptr<scalar_t>(), nullptr, dx.data_ptr<scalar_t>(), s);
      });
    }
    at::Tensor dweight, dbias;
    if (ctx->needs_input_grad(1)) dweight = (nx * sdyx).sum(0).to(weight.scalar_type()).reshape(weight.sizes());
    if (ctx->needs_input_grad(2)) dbias = sdy.sum(0).to(weight.scalar_type()).reshape(weight.sizes());
    return {dx, dweight, dbias};
  }
};

}  // namespace

at::Tensor grn_composite(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  // square -> sum -> sqrt is several times faster than linalg_vector_norm on CPU. The statistics are
  // taken in float32 also for bf16 activations (autocast, bf16 weights): a bf16 sum over H*W loses digits.
  const bool reduced = x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf;
  const at::Tensor xs = reduced ? x.to(at::kFloat) : x;
  at::Tensor gx = xs.square().sum({1, 2}, /*keepdim=*/true).sqrt();
  at::Tensor nx = gx / (gx.mean(-1, /*keepdim=*/true) + kEps);
  if (!reduced) return x + at::addcmul(bias, weight, x * nx);
  return (xs + at::addcmul(bias.to(at::kFloat), weight.to(at::kFloat), xs * nx)).to(x.scalar_type());
}

bool grn_uses_own_kernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const auto dt = x.scalar_type();
  return x.dim() == 4 && x.is_cpu() && (dt == at::kFloat || dt == at::kDouble) && weight.scalar_type() == dt &&
         bias.scalar_type() == dt && weight.is_cpu() && bias.is_cpu() && !aten_forced();
}

at::Tensor grn(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  check_args(x, weight, bias);
  if (!grn_uses_own_kernel(x, weight, bias)) return grn_composite(x, weight, bias);
  const bool grad = at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad() || bias.requires_grad());
  if (grad) return GrnFunction::apply(x, weight, bias);
  return fused_forward(x.contiguous(), weight, bias).y;
}

}  // namespace diffnet::ops
