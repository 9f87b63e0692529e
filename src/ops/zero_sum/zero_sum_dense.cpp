// Dense reference of the zero-sum discrepancy operator: obviously right, differentiable through LibTorch.
// Several LibTorch compositions are kept so the benchmark can show which is fastest; zero_sum_dense uses
// the fastest measured one for the map size (detail::dense_variant_for, see docs/ops.md).
#include <ATen/ATen.h>

#include "diffnet/common.h"
#include "diffnet/zero_sum.h"
#include "ops/zero_sum/zero_sum_impl.h"

namespace diffnet::ops {

int64_t zero_sum_kernel_size(const at::Tensor& theta) {
  TORCH_CHECK(theta.dim() == 3, "zero_sum: theta must be (C, M, K*K-1), got ", theta.sizes());
  int64_t n = theta.size(2) + 1;
  int64_t k = 1;
  while (k * k < n) k += 2;
  if (k * k != n || k < 3) throw Error("zero_sum", "theta's last dimension " + std::to_string(n - 1) +
                                                       " is not K*K-1 for an odd K >= 3");
  return k;
}

at::Tensor zero_sum_kernels(const at::Tensor& theta, int64_t n_free) {
  const int64_t K = zero_sum_kernel_size(theta);
  const int64_t C = theta.size(0), M = theta.size(1), c0 = (K * K) / 2;
  if (n_free < 0 || n_free > M)
    throw Error("zero_sum", "n_free " + std::to_string(n_free) + " outside [0, " + std::to_string(M) + "]");
  at::Tensor a = theta;
  if (n_free < M) {
    a = at::cat({theta.narrow(1, 0, n_free), theta.narrow(1, n_free, M - n_free).abs()}, 1);
  }
  at::Tensor s = a.sum(2, /*keepdim=*/true);
  at::Tensor k = at::cat({a.narrow(2, 0, c0), -s, a.narrow(2, c0, K * K - 1 - c0)}, 2);
  return k.view({C, M, K, K});
}

int64_t reflect_index(int64_t i, int64_t n) {
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  int64_t m = i % period;
  if (m < 0) m += period;
  return m < n ? m : period - m;
}

at::Tensor reflect_pad_any(const at::Tensor& x, int64_t r) {
  if (r == 0) return x;
  const int64_t H = x.size(-2), W = x.size(-1);
  auto make = [&](int64_t n) {
    at::Tensor idx = at::empty({n + 2 * r}, at::kLong);
    auto* p = idx.data_ptr<int64_t>();
    for (int64_t i = -r; i < n + r; ++i) p[i + r] = reflect_index(i, n);
    return idx.to(x.device());
  };
  return x.index_select(-2, make(H)).index_select(-1, make(W));
}

namespace {

// Native reflection padding where it is defined (r < H and r < W), else the iterated reflection.
at::Tensor reflect_pad(const at::Tensor& x, int64_t r) {
  if (r == 0) return x;
  if (r < x.size(-2) && r < x.size(-1)) return at::reflection_pad2d(x, {r, r, r, r});
  return reflect_pad_any(x, r);
}

at::Tensor activate(const at::Tensor& u, const std::string& activation) {
  if (activation == "abs") return u.abs();
  if (activation == "tanh") return u.tanh();
  if (activation == "none") return u;
  throw Error("zero_sum", "unknown activation '" + activation + "' (abs|none|tanh)");
}

at::Tensor dw_conv(const at::Tensor& x, const at::Tensor& w, int64_t groups) {
  return at::conv2d(x, w, {}, at::IntArrayRef{1, 1}, at::IntArrayRef{0, 0}, at::IntArrayRef{1, 1}, groups);
}

}  // namespace

at::Tensor depthwise_multi(const at::Tensor& x, const at::Tensor& kernels) {
  TORCH_CHECK(x.dim() == 4 && kernels.dim() == 4 && kernels.size(0) == x.size(1),
              "depthwise_multi: x (B,C,H,W) and kernels (C,M,K,K) expected, got ", x.sizes(), " and ",
              kernels.sizes());
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t M = kernels.size(1), K = kernels.size(2);
  at::Tensor xp = reflect_pad(x.contiguous(), K / 2);
  // (B, C*M, Hp, Wp): each channel repeated M times so every filter is a plain depthwise conv
  // (a channel-multiplier conv drops to a slow im2col path in oneDNN).
  at::Tensor xr = M == 1 ? xp : xp.unsqueeze(2).expand({B, C, M, xp.size(2), xp.size(3)})
                                    .reshape({B, C * M, xp.size(2), xp.size(3)});
  at::Tensor u = dw_conv(xr, kernels.reshape({C * M, 1, K, K}), C * M);
  return u.view({B, C, M, H, W});
}

namespace detail {

at::Tensor project(const at::Tensor& v, const at::Tensor& weight, const at::Tensor& bias) {
  const int64_t C = weight.size(0), M = weight.size(1);
  return (v * weight.view({1, C, M, 1, 1})).sum(2) + bias.view({1, C, 1, 1});
}

std::vector<std::string> dense_variants() {
  return {"split_cl", "split", "repeat", "repeat_cl", "repeat_projconv", "multiplier"};
}

at::Tensor dense_from_kernels(const at::Tensor& x, const at::Tensor& kernels, const at::Tensor& weight,
                              const at::Tensor& bias, const std::string& activation, const std::string& variant) {
  TORCH_CHECK(x.dim() == 4 && kernels.dim() == 4 && kernels.size(0) == x.size(1),
              "zero_sum: x (B,C,H,W) and kernels (C,M,K,K) expected, got ", x.sizes(), " and ", kernels.sizes());
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t M = kernels.size(1), K = kernels.size(2);
  TORCH_CHECK(weight.sizes() == at::IntArrayRef({C, M}) && bias.sizes() == at::IntArrayRef({C}),
              "zero_sum: weight (C,M) and bias (C) expected");
  if (variant == "split" || variant == "split_cl") {
    // One depthwise conv per filter on the same padded input (no repeated copy of the input).
    at::Tensor xp = reflect_pad(x, K / 2);
    xp = xp.contiguous(variant == "split_cl" ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
    at::Tensor out;
    for (int64_t m = 0; m < M; ++m) {
      at::Tensor v = activate(dw_conv(xp, kernels.select(1, m).unsqueeze(1), C), activation) *
                     weight.select(1, m).view({1, C, 1, 1});
      out = m == 0 ? v + bias.view({1, C, 1, 1}) : out + v;
    }
    return out;
  }
  at::Tensor xp = reflect_pad(x.contiguous(), K / 2);
  if (variant == "multiplier") {
    // Channel-multiplier depthwise conv (C -> C*M, groups C).
    at::Tensor u = dw_conv(xp, kernels.reshape({C * M, 1, K, K}), C);
    return project(activate(u, activation).view({B, C, M, H, W}), weight, bias);
  }
  at::Tensor xr = M == 1 ? xp : xp.unsqueeze(2).expand({B, C, M, xp.size(2), xp.size(3)})
                                    .reshape({B, C * M, xp.size(2), xp.size(3)});
  if (variant == "repeat_cl") xr = xr.contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor v = activate(dw_conv(xr, kernels.reshape({C * M, 1, K, K}), C * M), activation);
  if (variant == "repeat" || variant == "repeat_cl") return project(v.reshape({B, C, M, H, W}), weight, bias);
  if (variant == "repeat_projconv")
    return dw_conv(v, weight.reshape({C, M, 1, 1}), C) + bias.view({1, C, 1, 1});
  throw Error("zero_sum", "unknown dense variant '" + variant + "'");
}

}  // namespace detail

at::Tensor zero_sum_dense(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                          const at::Tensor& bias, int64_t n_free, const std::string& activation) {
  if (x.dim() != 4 || theta.dim() != 3 || theta.size(0) != x.size(1))
    throw Error("zero_sum", "input (B, C, H, W) and theta (C, M, K*K-1) with the same C expected");
  return detail::dense_from_kernels(x, zero_sum_kernels(theta, n_free), weight, bias, activation,
                                    detail::dense_variant_for(x.size(1), x.size(2), x.size(3)));
}

}  // namespace diffnet::ops
