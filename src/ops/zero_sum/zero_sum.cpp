// Zero-sum operator, device-independent parts: argument checks, theta <-> full-kernel algebra, the
// dense|fused switch and the one rule that chooses between them. The fused op's kernels per dispatch key
// are in cpu/zero_sum_cpu.cpp and cuda/zero_sum_cuda.cpp, registered in autograd/zero_sum_autograd.cpp.
#include "diffnet/zero_sum.h"

#include <ATen/ATen.h>

#include <cmath>
#include <string>

#include "diffnet/common.h"
#include "diffnet/device.h"
#include "ops/zero_sum/zero_sum_impl.h"

namespace diffnet::ops {
namespace detail {

at::Tensor full_kernels(const at::Tensor& theta, int64_t n_free) {
  const int64_t C = theta.size(0), M = theta.size(1), KK = theta.size(2) + 1, c0 = KK / 2;
  at::Tensor a = n_free >= M ? theta
                             : at::cat({theta.narrow(1, 0, n_free), theta.narrow(1, n_free, M - n_free).abs()}, 1);
  at::Tensor s = a.sum(2, /*keepdim=*/true);
  return at::cat({a.narrow(2, 0, c0), -s, a.narrow(2, c0, KK - 1 - c0)}, 2).reshape({C, M, KK}).contiguous();
}

at::Tensor theta_grad(const at::Tensor& dkern, const at::Tensor& theta, int64_t n_free) {
  const int64_t M = theta.size(1), KK = dkern.size(2), c0 = KK / 2;
  at::Tensor nb = at::cat({dkern.narrow(2, 0, c0), dkern.narrow(2, c0 + 1, KK - 1 - c0)}, 2);
  at::Tensor da = nb - dkern.narrow(2, c0, 1);
  if (n_free >= M) return da.contiguous();
  return at::cat({da.narrow(1, 0, n_free), da.narrow(1, n_free, M - n_free) * theta.narrow(1, n_free, M - n_free).sign()},
                 1)
      .contiguous();
}

void check_fused_args(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                      const at::Tensor& bias) {
  if (x.dim() != 4) throw Error("zero_sum", "input must be (B, C, H, W), got " + shape_str(x.sizes().vec()));
  if (theta.dim() != 3 || theta.size(0) != x.size(1))
    throw Error("zero_sum", "theta must be (C, M, K*K-1) with C = " + std::to_string(x.size(1)) + ", got " +
                                shape_str(theta.sizes().vec()));
  const int64_t C = theta.size(0), M = theta.size(1), K = zero_sum_kernel_size(theta);
  if (weight.dim() != 2 || weight.size(0) != C || weight.size(1) != M)
    throw Error("zero_sum", "weight must be (C, M) = (" + std::to_string(C) + ", " + std::to_string(M) + "), got " +
                                shape_str(weight.sizes().vec()));
  if (bias.dim() != 1 || bias.size(0) != C)
    throw Error("zero_sum", "bias must be (C) = (" + std::to_string(C) + "), got " + shape_str(bias.sizes().vec()));
  if (M < 1 || M > 4)
    throw Error("zero_sum", "the fused implementation supports 1..4 filters per channel, got " + std::to_string(M) +
                                " (use disc_impl=dense)");
  if (K > 9)
    throw Error("zero_sum", "the fused implementation supports K in {3, 5, 7, 9}, got " + std::to_string(K) +
                                " (use disc_impl=dense)");
  // Under autocast, bf16/fp16 arguments are computed in float32 (the op's autocast kernel).
  const bool autocast = autocast_enabled(x.device().type());
  auto computed = [autocast](const at::Tensor& t) {
    const auto d = t.scalar_type();
    return autocast && (d == at::kBFloat16 || d == at::kHalf) ? at::kFloat : d;
  };
  const auto dt = computed(x);
  if (dt != at::kFloat && dt != at::kDouble)
    throw Error("zero_sum", std::string("the fused implementation supports float32/float64 (bf16/fp16 under "
                                        "autocast), got ") + c10::toString(x.scalar_type()));
  if (computed(theta) != dt || computed(weight) != dt || computed(bias) != dt)
    throw Error("zero_sum", "input, theta, weight and bias must have the same dtype");
  if (theta.device() != x.device() || weight.device() != x.device() || bias.device() != x.device())
    throw Error("zero_sum", "input, theta, weight and bias must be on the same device");
  if (x.is_cuda() && !zero_sum_has_cuda())
    throw Error("zero_sum", "CUDA input, but this build has no CUDA kernels (configure with -DDIFFNET_CUDA=ON)");
  if (!x.is_cuda() && !x.device().is_cpu())
    throw Error("zero_sum", "the fused implementation runs on CPU or CUDA, got device " + x.device().str());
}

bool is_channels_last(const at::Tensor& t) {
  return t.dim() == 4 && t.size(1) > 1 && t.stride(1) == 1 && t.size(2) * t.size(3) > 1;
}

std::pair<at::Tensor, at::Tensor> padded_filters(const at::Tensor& kern, const at::Tensor& weight) {
  const int64_t C = kern.size(0), M = kern.size(1), KK = kern.size(2);
  if (M != 3) return {kern.contiguous(), weight.contiguous()};  // the raw kernels exist for M in {1, 2, 4}
  return {at::cat({kern, at::zeros({C, 1, KK}, kern.options())}, 1).contiguous(),
          at::cat({weight, at::zeros({C, 1}, weight.options())}, 1).contiguous()};
}

}  // namespace detail

bool zero_sum_has_cuda() {
#ifdef DIFFNET_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool zero_sum_cuda_available() {
  return zero_sum_has_cuda() && diffnet::cuda_available();
}

at::Tensor zero_sum(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                    const at::Tensor& bias, int64_t n_free, const std::string& impl,
                    const std::string& activation) {
  if (impl == "dense") return zero_sum_dense(x, theta, weight, bias, n_free, activation);
  if (impl == "fused") {
    if (activation != "abs")
      throw Error("zero_sum", "the fused implementation supports activation 'abs' only, got '" + activation +
                                  "' (use disc_impl=dense)");
    return zero_sum_fused(x, theta, weight, bias, n_free);
  }
  throw Error("zero_sum", "unknown implementation '" + impl + "' (dense|fused)");
}

bool zero_sum_fused_applies(const std::string& filter, const std::string& activation) {
  return filter == "zero_sum" && activation == "abs";
}

std::string zero_sum_impl_for(const std::string& filter, const std::string& activation, const std::string& requested,
                              bool forced, bool inference) {
  if (requested != "fused" && requested != "dense")
    throw Error("disc_impl", "unknown implementation '" + requested + "' (dense|fused)");
  if (!zero_sum_fused_applies(filter, activation)) return "dense";
  // Where it applies, fused is faster on every shape measured, CPU and CUDA, forward and backward
  // (docs/ops.md): inference takes it unless dense was asked for explicitly.
  if (requested == "fused" || (inference && !forced)) return "fused";
  return "dense";
}

}  // namespace diffnet::ops
