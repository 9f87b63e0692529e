// Internal pieces of the fused zero-sum operator shared by zero_sum.cpp, the autograd function and the
// CUDA binding. Tensors here are plain (no autograd), on one device, one floating dtype.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace diffnet::ops::detail {

// Full kernels (C, M, K*K) from theta (C, M, K*K-1): a (free: theta, anchored: |theta|) at the
// neighbours, -s = -sum(a) at the centre. s is computed once here, per call. (LibTorch ops: any device;
// the CUDA kernels have their own.)
at::Tensor full_kernels(const at::Tensor& theta, int64_t n_free);

// Chain rule from the full-kernel gradient (C, M, K*K) to theta: da = dk[nb] - dk[centre];
// dtheta = da (free) or da * sign(theta) (anchored, sign(0) = 0).
at::Tensor theta_grad(const at::Tensor& dkern, const at::Tensor& theta, int64_t n_free);

// Validates shapes/dtypes/devices of a fused call; throws diffnet::Error naming the problem.
void check_fused_args(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                      const at::Tensor& bias);

// Full kernels and weight with M padded to what the raw kernels are built for (M = 3 runs as M = 4 with a
// zero filter of zero weight); both contiguous. M itself when it needs no padding.
std::pair<at::Tensor, at::Tensor> padded_filters(const at::Tensor& kern, const at::Tensor& weight);

// ---- The fused op per dispatch key (registered in autograd/zero_sum_autograd.cpp) ------------------------
// Schema diffnet::zero_sum_fused(Tensor x, Tensor theta, Tensor weight, Tensor bias, int n_free) -> Tensor:
// x any layout (CPU reads any strides; channels_last is converted once), output in x's layout (channels_last
// in, channels_last out; else contiguous NCHW). Arguments are checked by check_fused_args before dispatch.
// Schema diffnet::_zero_sum_fused_backward(Tensor grad, Tensor x, Tensor theta, Tensor weight, int n_free,
// bool need_dx) -> (Tensor, Tensor, Tensor, Tensor): {dx (undefined unless need_dx; contiguous NCHW), dtheta,
// dweight, dbias}, from NCHW x and grad (what the autograd kernel saves: to_planes of the input).
// Each kernel dispatches on the dtype once (AT_DISPATCH_FLOATING_TYPES: float32, float64).
at::Tensor fused_forward_cpu(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                             const at::Tensor& bias, int64_t n_free);
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_backward_cpu(const at::Tensor& grad,
                                                                            const at::Tensor& x,
                                                                            const at::Tensor& theta,
                                                                            const at::Tensor& weight,
                                                                            int64_t n_free, bool need_dx);
#ifdef DIFFNET_WITH_CUDA
// CUDA (cuda/zero_sum_cuda.cpp): same contracts; coefficients and theta gradients by CUDA kernels too.
at::Tensor fused_forward_cuda(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                              const at::Tensor& bias, int64_t n_free);
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_backward_cuda(const at::Tensor& grad,
                                                                             const at::Tensor& x,
                                                                             const at::Tensor& theta,
                                                                             const at::Tensor& weight,
                                                                             int64_t n_free, bool need_dx);
#endif

// Layout handling around the kernels. The CPU kernels read and write (b, c) planes with any strides, but
// gathering planes from a channel-innermost (channels_last) tensor is slow, so such tensors are converted
// with the tiled transposes of cpu/zero_sum_kernel.h (faster than ATen's copy here). CUDA: contiguous().
//   is_channels_last(t)   channel stride 1 with C > 1 (what the model's activations are)
//   to_planes(t)          t itself when the kernels can read it in place, else a contiguous NCHW copy
//   to_layout(t, cl)      t (contiguous NCHW) as channels_last when cl, else t
bool is_channels_last(const at::Tensor& t);
at::Tensor to_planes(const at::Tensor& t);
at::Tensor to_layout(const at::Tensor& t, bool channels_last);

// Per-channel projection of the responses v (B, C, M, H, W): sum_m weight[c,m] v[:,c,m] + bias[c].
at::Tensor project(const at::Tensor& v, const at::Tensor& weight, const at::Tensor& bias);

// Dense LibTorch compositions on materialised kernels (C, M, K, K) (zero_sum_dense.cpp):
//   split_cl        reflect pad -> channels_last -> one depthwise conv per filter -> act -> w_m * v_m summed
//   split           the same in NCHW
//   repeat          reflect pad -> repeat each channel M times -> depthwise conv (C*M groups) -> act -> mul/sum
//   repeat_cl       the same with the repeated input channels_last
//   repeat_projconv repeat, projection as a grouped 1x1 conv
//   multiplier      channel-multiplier depthwise conv (C -> C*M, groups C) -> act -> mul/sum
std::vector<std::string> dense_variants();
at::Tensor dense_from_kernels(const at::Tensor& x, const at::Tensor& kernels, const at::Tensor& weight,
                              const at::Tensor& bias, const std::string& activation, const std::string& variant);
// The composition zero_sum_dense uses for C channels of H x W: the fastest for forward+backward on the
// 2-core CPU with channels_last input (docs/ops.md): split for C >= 256 above 32x32, else split_cl.
inline const char* dense_variant_for(int64_t C, int64_t H, int64_t W) {
  return C >= 256 && H * W > 32 * 32 ? "split" : "split_cl";
}


}  // namespace diffnet::ops::detail
