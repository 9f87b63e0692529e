// conv2d_gemm_grad (include/diffnet/conv_grad.h): LibTorch's forward and input gradient, an autograd
// function whose weight gradient is one BLAS product (1x1) or a product per chunk of gathered patches (K x K),
// where that was measured faster (conv_weight_grad).
#include "diffnet/conv_grad.h"

#include <ATen/Config.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <array>
#include <string>

#include "common/measured_choice.h"
#include "diffnet/common.h"

namespace diffnet::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

enum class Path { kUnset, kAten, kOurs };

Path parse_path(const std::string& choice, const char* what) {
  if (choice == "auto") return Path::kUnset;
  if (choice == "aten") return Path::kAten;
  if (choice == "ours") return Path::kOurs;
  throw Error(what, "'" + choice + "' is not one of auto, aten, ours");
}

at::Tensor forward_conv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, int64_t p) {
#if AT_MKLDNN_ENABLED()
  // What at::conv2d picks for these CPU float32 tensors, without its dispatch checks (model::pointwise_conv).
  if (at::globalContext().userEnabledMkldnn())
    return at::mkldnn_convolution(x, weight, bias, {p, p}, {1, 1}, {1, 1}, 1);
#endif
  return at::conv2d(x, weight, bias, {1, 1}, {p, p});
}

// LibTorch's backward for the gradients in `mask` (input, weight, bias).
std::tuple<at::Tensor, at::Tensor, at::Tensor> aten_backward(const at::Tensor& g, const at::Tensor& x,
                                                             const at::Tensor& weight, int64_t p, bool has_bias,
                                                             std::array<bool, 3> mask) {
  const int64_t N = weight.size(0);
  return at::convolution_backward(g, x, weight, has_bias ? c10::optional<at::IntArrayRef>(at::IntArrayRef(&N, 1))
                                                         : c10::nullopt,
                                  {1, 1}, {p, p}, {1, 1}, false, {0, 0}, 1, mask);
}

std::tuple<at::Tensor, at::Tensor> weight_grad_aten(const at::Tensor& g, const at::Tensor& x,
                                                    const at::Tensor& weight, int64_t p, bool has_bias) {
  auto r = aten_backward(g, x, weight, p, has_bias, {false, true, has_bias});
  return {std::get<1>(r), std::get<2>(r)};
}

std::tuple<at::Tensor, at::Tensor> weight_grad_ours(const at::Tensor& g, const at::Tensor& x,
                                                    const at::Tensor& weight, int64_t p) {
  auto [dw, db] = conv_weight_grad_gemm(g, x, weight.size(2), p);
  return {dw.contiguous(weight.suggest_memory_format()), db};  // the parameter's layout
}

// Both ways on a block's 1x1 and the decoder's 3x3 (fixed values: no random draws, which would move the
// seeded generator), alternated, best of three rounds after a warm-up each; the faster total wins.
Path measure_path() {
  at::NoGradGuard no_grad;
  struct Probe {
    at::Tensor x, g, w;
    int64_t p;
  };
  auto probe = [](int64_t C, int64_t N, int64_t K) {
    const auto cl = at::MemoryFormat::ChannelsLast;
    return Probe{at::full({2, C, 64, 64}, 0.01f).contiguous(cl), at::full({2, N, 64, 64}, 0.01f).contiguous(cl),
                 at::full({N, C, K, K}, 0.01f), K / 2};
  };
  const Probe probes[] = {probe(64, 256, 1), probe(64, 64, 3)};
  double best[2] = {1e30, 1e30};
  for (int round = 0; round < 4; ++round)
    for (int path = 0; path < 2; ++path) {
      double t = 0;
      for (const Probe& q : probes) {
        const double t0 = now_seconds();
        if (path == 0)
          (void)weight_grad_aten(q.g, q.x, q.w, q.p, true);
        else
          (void)weight_grad_ours(q.g, q.x, q.w, q.p);
        t += now_seconds() - t0;
      }
      if (round > 0) best[path] = std::min(best[path], t);
    }
  return best[1] < best[0] ? Path::kOurs : Path::kAten;
}

MeasuredChoice<Path> g_path("DIFFNET_CONV_WGRAD", parse_path, measure_path);

Path current_path() { return g_path.get(); }

at::Tensor backward_dx(const at::Tensor& g, const at::Tensor& x, const at::Tensor& weight, int64_t p) {
  return std::get<0>(aten_backward(g, x, weight, p, false, {true, false, false}));
}

variable_list backward_all(AutogradContext* ctx, const variable_list& grads, bool has_bias) {
  const auto saved = ctx->get_saved_variables();
  const at::Tensor &x = saved[0], &weight = saved[1];
  const int64_t p = ctx->saved_data["padding"].toInt();
  variable_list out(has_bias ? 3 : 2);
  if (!grads[0].defined()) return out;
  const at::Tensor g = grads[0].contiguous(at::MemoryFormat::ChannelsLast);
  if (ctx->needs_input_grad(0)) out[0] = backward_dx(g, x, weight, p);
  if (ctx->needs_input_grad(1) || (has_bias && ctx->needs_input_grad(2))) {
    auto [dw, db] = current_path() == Path::kOurs ? weight_grad_ours(g, x, weight, p)
                                                  : weight_grad_aten(g, x, weight, p, has_bias);
    if (ctx->needs_input_grad(1)) out[1] = dw;
    if (has_bias && ctx->needs_input_grad(2)) out[2] = db;
  }
  return out;
}

// With a bias; the one below without (an undefined tensor cannot be an autograd function's input).
struct ConvGemmGradFunction : public torch::autograd::Function<ConvGemmGradFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, int64_t padding) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["padding"] = padding;
    return forward_conv(x, weight, bias, padding);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list out = backward_all(ctx, grads, true);
    out.emplace_back();  // padding
    return out;
  }
};

struct ConvGemmGradNoBiasFunction : public torch::autograd::Function<ConvGemmGradNoBiasFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, int64_t padding) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["padding"] = padding;
    return forward_conv(x, weight, at::Tensor(), padding);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list out = backward_all(ctx, grads, false);
    out.emplace_back();  // padding
    return out;
  }
};

}  // namespace

bool conv_gemm_grad_applies(const at::Tensor& x, const at::Tensor& weight, int64_t padding) {
  if (!at::GradMode::is_enabled() || !(x.requires_grad() || weight.requires_grad())) return false;
  if (x.dim() != 4 || weight.dim() != 4 || !x.is_cpu() || x.scalar_type() != at::kFloat ||
      weight.scalar_type() != at::kFloat || weight.size(1) != x.size(1))
    return false;
  const int64_t K = weight.size(2);
  return weight.size(3) == K && K % 2 == 1 && padding == K / 2;
}

void set_conv_weight_grad(const std::string& choice) {
  g_path.set(parse_path(choice, "conv weight gradient"));
}

std::string conv_weight_grad() { return current_path() == Path::kOurs ? "ours" : "aten"; }

at::Tensor conv2d_gemm_grad(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, int64_t padding) {
  if (!conv_gemm_grad_applies(x, weight, padding)) return at::conv2d(x, weight, bias, {1, 1}, {padding, padding});
  RECORD_FUNCTION("diffnet::conv2d_gemm_grad", std::vector<c10::IValue>({x}));  // named in profiles
  return bias.defined() ? ConvGemmGradFunction::apply(x, weight, bias, padding)
                        : ConvGemmGradNoBiasFunction::apply(x, weight, padding);
}

std::tuple<at::Tensor, at::Tensor> conv_weight_grad_gemm(const at::Tensor& grad, const at::Tensor& x, int64_t K,
                                                         int64_t padding, int64_t chunk_pixels) {
  if (x.dim() != 4 || grad.dim() != 4) throw Error("conv_weight_grad_gemm", "input and gradient must be 4-D");
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), N = grad.size(1);
  if (K < 1 || padding < 0 || 2 * padding + 1 != K)
    throw Error("conv_weight_grad_gemm", "needs an odd K with padding (K - 1) / 2");
  if (grad.size(0) != B || grad.size(2) != H || grad.size(3) != W)
    throw Error("conv_weight_grad_gemm", "gradient must be (B, N, H, W) with the input's B, H, W");
  if (!x.is_cpu() || !grad.is_cpu() || x.scalar_type() != at::kFloat || grad.scalar_type() != at::kFloat)
    throw Error("conv_weight_grad_gemm", "needs CPU float32 tensors");
  RECORD_FUNCTION("diffnet::conv_weight_grad_gemm", std::vector<c10::IValue>({x}));
  // (B,C,H,W) channels_last is (B,H,W,C) in memory: the pixels' rows of the products below.
  const at::Tensor g = grad.contiguous(at::MemoryFormat::ChannelsLast).permute({0, 2, 3, 1}).reshape({B * H * W, N});
  const at::Tensor xl = x.contiguous(at::MemoryFormat::ChannelsLast).permute({0, 2, 3, 1});  // (B,H,W,C)
  at::Tensor db = g.sum(0);
  if (K == 1) return {at::mm(g.t(), xl.reshape({B * H * W, C})).view({N, C, 1, 1}), db};
  const int64_t P = padding;
  const at::Tensor xp = at::constant_pad_nd(xl, {0, 0, P, P, P, P});  // (B, H+2P, W+2P, C)
  const int64_t rows = std::clamp<int64_t>(chunk_pixels / W, 1, H);
  at::Tensor cols = at::empty({rows, W, K, K, C}, x.options());  // patch of each output pixel, (i, j, c) order
  at::Tensor acc = at::zeros({N, K * K * C}, x.options());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r0 = 0; r0 < H; r0 += rows) {
      const int64_t r = std::min(rows, H - r0);
      at::Tensor cb = cols.narrow(0, 0, r);
      for (int64_t i = 0; i < K; ++i)
        for (int64_t j = 0; j < K; ++j) cb.select(2, i).select(2, j).copy_(xp[b].narrow(0, r0 + i, r).narrow(1, j, W));
      acc.addmm_(g.narrow(0, (b * H + r0) * W, r * W).t(), cb.reshape({r * W, K * K * C}));
    }
  return {acc.view({N, K, K, C}).permute({0, 3, 1, 2}).contiguous(), db};
}

}  // namespace diffnet::ops
