// depthwise_conv (include/diffnet/depthwise.h): at::conv2d forward, an autograd function whose CPU
// backward computes the input gradient as a flipped-tap forward convolution and the weight gradient with
// the NHWC kernel of cpu/depthwise_kernel.cpp.
#include "diffnet/depthwise.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>

#include "diffnet/common.h"
#include "ops/env_switch.h"
#include "ops/depthwise/cpu/depthwise_kernel.h"

namespace diffnet::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void check_args(const at::Tensor& x, const at::Tensor& weight) {
  if (x.dim() != 4) throw Error("depthwise", "input must be (B, C, H, W)");
  const int64_t C = x.size(1), K = weight.dim() == 4 ? weight.size(2) : 0;
  if (weight.dim() != 4 || weight.size(0) != C || weight.size(1) != 1 || weight.size(3) != K || K % 2 == 0 || K > 9)
    throw Error("depthwise", "weight must be (C, 1, K, K) with C = " + std::to_string(C) + " and K odd <= 9");
}

bool aten_forced() {
  static const bool forced = env_says_aten("DIFFNET_DEPTHWISE");
  return forced;
}

at::Tensor forward_conv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const int64_t K = weight.size(2);
  return at::conv2d(x, weight, bias, {1, 1}, {K / 2, K / 2}, {1, 1}, x.size(1));
}

// With a bias; the one below without (an undefined tensor cannot be an autograd function's input).
struct DepthwiseConvFunction : public torch::autograd::Function<DepthwiseConvFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias) {
    ctx->save_for_backward({x, weight});
    return forward_conv(x, weight, bias);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    auto [dx, dweight, dbias] = depthwise_conv_backward(grads[0], saved[0], saved[1], ctx->needs_input_grad(0));
    return {dx, ctx->needs_input_grad(1) ? dweight : at::Tensor(), ctx->needs_input_grad(2) ? dbias : at::Tensor()};
  }
};

struct DepthwiseConvNoBiasFunction : public torch::autograd::Function<DepthwiseConvNoBiasFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight) {
    ctx->save_for_backward({x, weight});
    return forward_conv(x, weight, at::Tensor());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor()};
    auto [dx, dweight, dbias] = depthwise_conv_backward(grads[0], saved[0], saved[1], ctx->needs_input_grad(0));
    return {dx, ctx->needs_input_grad(1) ? dweight : at::Tensor()};
  }
};

}  // namespace

bool depthwise_uses_own_backward(const at::Tensor& x, const at::Tensor& weight) {
  if (!at::GradMode::is_enabled() || !(x.requires_grad() || weight.requires_grad())) return false;
  const auto dt = x.scalar_type();
  return x.is_cpu() && (dt == at::kFloat || dt == at::kDouble) && weight.scalar_type() == dt && !aten_forced();
}

at::Tensor depthwise_conv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  RECORD_FUNCTION("diffnet::depthwise_conv", std::vector<c10::IValue>({x}));  // named in profiles
  check_args(x, weight);
  if (!depthwise_uses_own_backward(x, weight)) return forward_conv(x, weight, bias);
  return bias.defined() ? DepthwiseConvFunction::apply(x, weight, bias)
                        : DepthwiseConvNoBiasFunction::apply(x, weight);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> depthwise_conv_backward(const at::Tensor& grad, const at::Tensor& x,
                                                                        const at::Tensor& weight, bool need_dx) {
  check_args(x, weight);
  if (!x.is_cpu() || !grad.is_cpu()) throw Error("depthwise", "the own backward is for CPU tensors");
  if (grad.sizes() != x.sizes()) throw Error("depthwise", "gradient and input differ in shape");
  const auto dt = x.scalar_type();
  if ((dt != at::kFloat && dt != at::kDouble) || grad.scalar_type() != dt || weight.scalar_type() != dt)
    throw Error("depthwise", "the own backward is for float32/float64 (all three arguments alike)");
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), K = weight.size(2);
  const cpu::DepthwiseShape s{B, H, W, C, K};
  // NHWC views: channels_last contiguous (B, C, H, W) is (B, H, W, C) contiguous in memory.
  const at::Tensor g = grad.contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor xin = x.contiguous(at::MemoryFormat::ChannelsLast);
  // The input gradient is the forward convolution of the gradient with the taps flipped (LibTorch's,
  // oneDNN on channels_last: as fast as the forward); the weight gradient is our kernel.
  at::Tensor dx;
  if (need_dx) dx = at::conv2d(g, weight.flip({2, 3}), {}, {1, 1}, {K / 2, K / 2}, {1, 1}, C);
  at::Tensor dtaps = at::empty({K * K, C}, x.options());
  AT_DISPATCH_FLOATING_TYPES(dt, "depthwise_conv_backward", [&] {
    cpu::depthwise_backward_weight_nhwc<scalar_t>(g.data_ptr<scalar_t>(), xin.data_ptr<scalar_t>(),
                                                  dtaps.data_ptr<scalar_t>(), s);
  });
  at::Tensor dweight = dtaps.t().reshape({C, 1, K, K}).contiguous();
  at::Tensor dbias = g.sum({0, 2, 3});
  return {dx, dweight, dbias};
}

namespace {

// What the kernel itself needs: no gradient recorded, float32 or bf16 on the CPU (the weights in the same
// dtype), channels_last, K = 7 with a bias, C a multiple of 4.
bool dwln_kernel_takes(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad())) return false;
  const auto dt = x.scalar_type();
  return x.dim() == 4 && x.is_cpu() && (dt == at::kFloat || dt == at::kBFloat16) && weight.scalar_type() == dt &&
         bias.defined() && bias.scalar_type() == dt && weight.dim() == 4 && weight.size(2) == 7 &&
         x.is_contiguous(at::MemoryFormat::ChannelsLast) && cpu::depthwise7_layer_norm_lanes(x.size(1)) > 0;
}

}  // namespace

bool depthwise_layer_norm_applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  static const bool forced = env_says_aten("DIFFNET_DWLN");
  return !forced && dwln_kernel_takes(x, weight, bias) &&
         cpu::depthwise7_layer_norm_faster(x.size(1), static_cast<int64_t>(x.element_size()));
}

at::Tensor depthwise_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                const at::Tensor& ln_weight, const at::Tensor& ln_bias, double eps) {
  RECORD_FUNCTION("diffnet::depthwise_layer_norm", std::vector<c10::IValue>({x}));  // named in profiles
  check_args(x, weight);
  if (!dwln_kernel_takes(x, weight, bias))
    throw Error("depthwise_layer_norm", "needs a float32 or bf16 channels_last CPU input without gradients, K = 7 "
                                        "with a bias in the same dtype and C a multiple of 4");
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  if (ln_weight.numel() != C || ln_bias.numel() != C || bias.numel() != C)
    throw Error("depthwise_layer_norm", "bias, LayerNorm weight and bias must hold C = " + std::to_string(C) + " values");
  auto as_float = [](const at::Tensor& t) { return t.to(at::kFloat).contiguous(); };
  const at::Tensor w = as_float(weight), b = as_float(bias), g = as_float(ln_weight), be = as_float(ln_bias);
  at::Tensor out = at::empty({B, H, W, C}, x.options());
  cpu::DwLnShape s;
  s.B = B, s.H = H, s.W = W, s.C = C, s.eps = static_cast<float>(eps);
  if (x.scalar_type() == at::kFloat)
    cpu::depthwise7_layer_norm_nhwc(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
                                    g.data_ptr<float>(), be.data_ptr<float>(), out.data_ptr<float>(), s);
  else  // bf16: its bit patterns
    cpu::depthwise7_layer_norm_nhwc(reinterpret_cast<const uint16_t*>(x.data_ptr<at::BFloat16>()), w.data_ptr<float>(),
                                    b.data_ptr<float>(), g.data_ptr<float>(), be.data_ptr<float>(),
                                    reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>()), s);
  return out;
}

}  // namespace diffnet::ops
