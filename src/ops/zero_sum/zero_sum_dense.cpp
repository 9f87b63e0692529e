// Dense reference of the zero-sum discrepancy operator: obviously right, differentiable through LibTorch.
#include <ATen/ATen.h>

#include "diffnet/common.h"
#include "diffnet/zero_sum.h"

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
  TORCH_CHECK(n_free >= 0 && n_free <= M, "zero_sum: n_free ", n_free, " outside [0, ", M, "]");
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

at::Tensor depthwise_multi(const at::Tensor& x, const at::Tensor& kernels) {
  TORCH_CHECK(x.dim() == 4 && kernels.dim() == 4 && kernels.size(0) == x.size(1),
              "depthwise_multi: x (B,C,H,W) and kernels (C,M,K,K) expected, got ", x.sizes(), " and ",
              kernels.sizes());
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t M = kernels.size(1), K = kernels.size(2);
  at::Tensor xp = reflect_pad_any(x.contiguous(), K / 2);
  // (B, C*M, Hp, Wp): each channel repeated M times so every filter is a plain depthwise conv
  // (a channel-multiplier conv drops to a slow im2col path in oneDNN).
  at::Tensor xr = M == 1 ? xp : xp.unsqueeze(2).expand({B, C, M, xp.size(2), xp.size(3)})
                                    .reshape({B, C * M, xp.size(2), xp.size(3)});
  at::Tensor w = kernels.reshape({C * M, 1, K, K});
  at::Tensor u = at::conv2d(xr, w, {}, at::IntArrayRef{1, 1}, at::IntArrayRef{0, 0},
                            at::IntArrayRef{1, 1}, C * M);
  return u.view({B, C, M, H, W});
}

at::Tensor zero_sum_dense(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                          const at::Tensor& bias, int64_t n_free, const std::string& activation) {
  const int64_t C = theta.size(0), M = theta.size(1);
  TORCH_CHECK(weight.sizes() == at::IntArrayRef({C, M}) && bias.sizes() == at::IntArrayRef({C}),
              "zero_sum: weight (C,M) and bias (C) expected");
  at::Tensor u = depthwise_multi(x, zero_sum_kernels(theta, n_free));
  at::Tensor v;
  if (activation == "abs") v = u.abs();
  else if (activation == "tanh") v = u.tanh();
  else if (activation == "none") v = u;
  else throw Error("zero_sum", "unknown activation '" + activation + "' (abs|none|tanh)");
  return (v * weight.view({1, C, M, 1, 1})).sum(2) + bias.view({1, C, 1, 1});
}

at::Tensor zero_sum(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                    const at::Tensor& bias, int64_t n_free, const std::string& impl,
                    const std::string& activation) {
  if (impl == "dense") return zero_sum_dense(x, theta, weight, bias, n_free, activation);
  if (impl == "fused") {
    if (activation != "abs")
      throw Error("zero_sum", "the fused implementation supports activation 'abs' only, got '" +
                                  activation + "' (use disc_impl=dense)");
    return zero_sum_fused(x, theta, weight, bias, n_free);
  }
  throw Error("zero_sum", "unknown implementation '" + impl + "' (dense|fused)");
}

}  // namespace diffnet::ops
