// grn and gelu_grn (include/diffnet/grn.h): the composite formula, and the fused CPU paths (cpu/grn_kernel.cpp
// passes; the (B, C) statistics and their gradient in double with LibTorch operations) as autograd functions.
#include "diffnet/grn.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>
#include <type_traits>

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

// The statistics from the per-channel sums of squares ss (B, C, double): gx = sqrt(ss), nx = gx / (mean
// over c of gx + eps), and the output's per-channel scale a = 1 + weight * nx in the arithmetic's dtype.
struct Stats {
  at::Tensor gx, nx, a;
};

Stats stats_from_sums(const at::Tensor& ss, const at::Tensor& weight, at::ScalarType dtype) {
  Stats st;
  st.gx = ss.sqrt();
  st.nx = st.gx / (st.gx.mean(1, /*keepdim=*/true) + kEps);
  st.a = (1.0 + weight.reshape({ss.size(1)}).to(at::kDouble) * st.nx).to(dtype).contiguous();
  return st;
}

// The forward on contiguous x: y, the statistics gx, nx (B, C) in double; with `gelu`, x is the GELU's
// input h, and g = gelu(h) (what GRN normalises) is returned too.
struct Forward {
  at::Tensor y, g, gx, nx;
};

// The two passes on storage type S (float, double, or cpu::Bf16 for bf16 tensors).
template <typename S>
Stats forward_passes(const at::Tensor& x, const at::Tensor& g, const at::Tensor& y, const at::Tensor& weight,
                     const at::Tensor& bias, bool gelu) {
  using T = cpu::compute_t<S>;
  const cpu::GrnShape s = shape_of(x);
  const at::ScalarType ct = std::is_same_v<T, float> ? at::kFloat : at::kDouble;
  at::Tensor ss = at::empty({s.B, s.C}, x.options().dtype(at::kDouble));
  const at::Tensor b = bias.reshape({s.C}).to(ct).contiguous();
  auto ptr = [](const at::Tensor& t) { return static_cast<S*>(t.data_ptr()); };
  if (gelu)
    cpu::gelu_channel_sums<S>(ptr(x), ptr(g), ss.data_ptr<double>(), s);
  else
    cpu::channel_sums<S>(ptr(x), ptr(x), ss.data_ptr<double>(), nullptr, s);
  Stats st = stats_from_sums(ss, weight, ct);
  cpu::channel_affine<S>(ptr(g), st.a.data_ptr<T>(), nullptr, nullptr, b.data_ptr<T>(), ptr(y), s);
  return st;
}

// keep_g = false (inference with the GELU): y is written over g, which nothing reads afterwards (one map-sized
// tensor fewer; the same values, each read before it is overwritten).
Forward fused_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool gelu,
                      bool keep_g = true) {
  const at::Tensor g = gelu ? at::empty_like(x) : x;
  at::Tensor y = gelu && !keep_g ? g : at::empty_like(x);
  Stats st;
  switch (x.scalar_type()) {
    case at::kFloat: st = forward_passes<float>(x, g, y, weight, bias, gelu); break;
    case at::kDouble: st = forward_passes<double>(x, g, y, weight, bias, gelu); break;
    case at::kBFloat16: st = forward_passes<cpu::Bf16>(x, g, y, weight, bias, gelu); break;
    default: throw Error("grn", "no fused kernel for this dtype");
  }
  return {y, g, st.gx, st.nx};
}

// The backward of y = GRN(x) from the upstream gradient dy (contiguous), x, and the forward's gx, nx:
// the per-channel terms of the input gradient dx = dy * a + x * k, and the parameter gradients asked for.
struct Backward {
  at::Tensor a, k, dweight, dbias;
};

Backward backward_terms(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& gx,
                        const at::Tensor& nx, AutogradContext* ctx) {
  const cpu::GrnShape s = shape_of(x);
  const auto f64 = x.options().dtype(at::kDouble);
  at::Tensor sdyx = at::empty({s.B, s.C}, f64), sdy = at::empty({s.B, s.C}, f64);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grn_backward_sums", [&] {
    cpu::channel_sums<scalar_t>(dy.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), sdyx.data_ptr<double>(),
                                sdy.data_ptr<double>(), s);
  });
  const at::Tensor w = weight.reshape({s.C}).to(at::kDouble);
  Backward r;
  if (ctx->needs_input_grad(0)) {
    // y = x (1 + w nx) + bias; nx_c = gx_c / (m + eps) with m the mean of gx over c; gx = ||x||.
    const at::Tensor A = w * sdyx;                                    // dL/dnx
    const at::Tensor denom = gx.mean(1, /*keepdim=*/true) + kEps;     // (B, 1)
    const at::Tensor dgx = A / denom - (A * gx).sum(1, /*keepdim=*/true) / (denom * denom * static_cast<double>(s.C));
    r.k = at::where(gx > 0, dgx / gx.clamp_min(1e-300), at::zeros_like(gx)).to(x.scalar_type()).contiguous();
    r.a = (1.0 + w * nx).to(x.scalar_type()).contiguous();
  }
  if (ctx->needs_input_grad(1)) r.dweight = (nx * sdyx).sum(0).to(weight.scalar_type()).reshape(weight.sizes());
  if (ctx->needs_input_grad(2)) r.dbias = sdy.sum(0).to(weight.scalar_type()).reshape(weight.sizes());
  return r;
}

// y = GRN(x), or with kGelu y = GRN(gelu(h)): the input and what GRN normalised (x itself, or g = gelu(h))
// are kept for the backward, whose input pass is GRN's (dx = dy a + x k) or takes that gradient through
// the GELU (dh = (dy a + g k) gelu'(h)) without writing dg.
template <bool kGelu>
struct FusedGrnFunction : public torch::autograd::Function<FusedGrnFunction<kGelu>> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias) {
    const at::Tensor xc = x.contiguous();
    Forward f = fused_forward(xc, weight, bias, kGelu);
    ctx->save_for_backward({xc, f.g, weight});
    ctx->saved_data["gx"] = f.gx;
    ctx->saved_data["nx"] = f.nx;
    return f.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& g = saved[1];  // x itself without the GELU
    const at::Tensor dy = grads[0].contiguous();
    const Backward t =
        backward_terms(dy, g, saved[2], ctx->saved_data["gx"].toTensor(), ctx->saved_data["nx"].toTensor(), ctx);
    at::Tensor dx;
    if (ctx->needs_input_grad(0)) {
      dx = at::empty_like(x);
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grn_backward_input", [&] {
        if (kGelu)
          cpu::gelu_grn_input_grad<scalar_t>(dy.data_ptr<scalar_t>(), t.a.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(),
                                             t.k.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                             dx.data_ptr<scalar_t>(), shape_of(x));
        else
          cpu::channel_affine<scalar_t>(dy.data_ptr<scalar_t>(), t.a.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                        t.k.data_ptr<scalar_t>(), nullptr, dx.data_ptr<scalar_t>(), shape_of(x));
      });
    }
    return {dx, t.dweight, t.dbias};
  }
};

bool gelu_aten_forced() {
  static const bool forced = env_says_aten("DIFFNET_GELU_GRN");
  return forced;
}

bool wants_grad(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad() || bias.requires_grad());
}

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
  if (x.dim() != 4 || !x.is_cpu() || !weight.is_cpu() || !bias.is_cpu() || aten_forced()) return false;
  if (dt == at::kBFloat16)  // inference: bf16 storage, float arithmetic; weights bf16 (a bf16 model) or float
    return !wants_grad(x, weight, bias) && weight.scalar_type() == bias.scalar_type() &&
           (weight.scalar_type() == at::kBFloat16 || weight.scalar_type() == at::kFloat);
  return (dt == at::kFloat || dt == at::kDouble) && weight.scalar_type() == dt && bias.scalar_type() == dt;
}

at::Tensor grn(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  RECORD_FUNCTION("diffnet::grn", std::vector<c10::IValue>({x}));  // named in profiles
  check_args(x, weight, bias);
  if (!grn_uses_own_kernel(x, weight, bias)) return grn_composite(x, weight, bias);
  if (wants_grad(x, weight, bias)) return FusedGrnFunction<false>::apply(x, weight, bias);
  return fused_forward(x.contiguous(), weight, bias, /*gelu=*/false).y;
}

bool gelu_grn_uses_own_kernel(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias) {
  return grn_uses_own_kernel(h, weight, bias) && !gelu_aten_forced();
}

at::Tensor gelu_grn(const at::Tensor& h, const at::Tensor& weight, const at::Tensor& bias) {
  RECORD_FUNCTION("diffnet::gelu_grn", std::vector<c10::IValue>({h}));  // named in profiles
  check_args(h, weight, bias);
  if (!gelu_grn_uses_own_kernel(h, weight, bias)) return grn(at::gelu(h), weight, bias);
  if (wants_grad(h, weight, bias)) return FusedGrnFunction<true>::apply(h, weight, bias);
  return fused_forward(h.contiguous(), weight, bias, /*gelu=*/true, /*keep_g=*/false).y;
}

}  // namespace diffnet::ops
