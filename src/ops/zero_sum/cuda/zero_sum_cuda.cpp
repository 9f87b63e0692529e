// Thin LibTorch binding of the CUDA kernels (built only with DIFFNET_CUDA=ON): the CUDA kernels of the op
// per dispatch key (registered in autograd/zero_sum_autograd.cpp). Allocates outputs and scratch through
// the caching allocator and launches on the current stream of the input's device.
// Only c10/cuda headers (CUDA runtime API), not ATen/cuda/CUDAContext.h (which pulls in cuBLAS/cuSPARSE/
// cuSOLVER headers that must then match the toolkit PyTorch was built with).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cmath>
#include <string>
#include <tuple>

#include "diffnet/common.h"
#include "diffnet/zero_sum.h"
#include "ops/zero_sum/cuda/zero_sum_cuda.h"
#include "ops/zero_sum/zero_sum_impl.h"

namespace diffnet::ops::detail {
namespace {

void check(int err, const char* what) {
  if (err != 0)
    throw Error("zero_sum", std::string("CUDA ") + what + " failed: " + cuda::zero_sum_cuda_error_string(err));
}

void* current_stream() { return static_cast<void*>(c10::cuda::getCurrentCUDAStream().stream()); }

cuda::ZeroSumShape shape_of(const at::Tensor& x, const at::Tensor& kern) {
  cuda::ZeroSumShape s;
  s.B = x.size(0), s.C = x.size(1), s.H = x.size(2), s.W = x.size(3), s.M = kern.size(1);
  s.K = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(kern.size(2)))));
  return s;
}

// Full kernels (C, M, K*K) from theta by the CUDA kernel (the contract of detail::full_kernels).
at::Tensor full_kernels_cuda(const at::Tensor& theta_in, int64_t n_free) {
  at::Tensor theta = theta_in.contiguous();
  const int64_t C = theta.size(0), M = theta.size(1), K = zero_sum_kernel_size(theta);
  at::Tensor kern = at::empty({C, M, K * K}, theta.options());
  AT_DISPATCH_FLOATING_TYPES(theta.scalar_type(), "zero_sum_full_kernels_cuda", [&] {
    check(cuda::zero_sum_full_kernels_cuda<scalar_t>(theta.data_ptr<scalar_t>(), kern.data_ptr<scalar_t>(), C, M,
                                                     n_free, K, current_stream()),
          "coefficients");
  });
  return kern;
}

// Chain rule to theta by the CUDA kernel (the contract of detail::theta_grad).
at::Tensor theta_grad_cuda(const at::Tensor& dkern_in, const at::Tensor& theta_in, int64_t n_free) {
  at::Tensor dkern = dkern_in.contiguous(), theta = theta_in.contiguous();
  const int64_t C = theta.size(0), M = theta.size(1), K = zero_sum_kernel_size(theta);
  at::Tensor dtheta = at::empty_like(theta);
  AT_DISPATCH_FLOATING_TYPES(theta.scalar_type(), "zero_sum_theta_grad_cuda", [&] {
    check(cuda::zero_sum_theta_grad_cuda<scalar_t>(dkern.data_ptr<scalar_t>(), theta.data_ptr<scalar_t>(),
                                                   dtheta.data_ptr<scalar_t>(), C, M, n_free, K, current_stream()),
          "theta gradient");
  });
  return dtheta;
}

}  // namespace

at::Tensor fused_forward_cuda(const at::Tensor& x_in, const at::Tensor& theta, const at::Tensor& weight_in,
                              const at::Tensor& bias_in, int64_t n_free) {
  c10::cuda::CUDAGuard guard(x_in.device());
  const bool cl = is_channels_last(x_in);
  const at::Tensor x = x_in.contiguous(), bias = bias_in.contiguous();
  auto [kern, weight] = padded_filters(full_kernels_cuda(theta, n_free), weight_in);
  at::Tensor out = at::empty(x.sizes(), x.options());
  const cuda::ZeroSumShape s = shape_of(x, kern);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "zero_sum_fused_cuda", [&] {
    check(cuda::zero_sum_forward_cuda<scalar_t>(x.data_ptr<scalar_t>(), kern.data_ptr<scalar_t>(),
                                                weight.data_ptr<scalar_t>(), bias.data_ptr<scalar_t>(),
                                                out.data_ptr<scalar_t>(), s, current_stream()),
          "forward");
  });
  return to_layout(out, cl);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_backward_cuda(const at::Tensor& grad_in,
                                                                             const at::Tensor& x_in,
                                                                             const at::Tensor& theta,
                                                                             const at::Tensor& weight_in,
                                                                             int64_t n_free, bool need_dx) {
  c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = x_in.contiguous(), grad = grad_in.contiguous();
  const int64_t M = theta.size(1);
  auto [kern, weight] = padded_filters(full_kernels_cuda(theta, n_free), weight_in);
  const cuda::ZeroSumShape s = shape_of(x, kern);
  at::Tensor dx = need_dx ? at::empty(x.sizes(), x.options()) : at::Tensor();
  at::Tensor dk = at::empty(kern.sizes(), x.options());
  at::Tensor dw = at::empty(weight.sizes(), x.options());
  at::Tensor db = at::empty({s.C}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "zero_sum_fused_backward_cuda", [&] {
    const size_t bytes = cuda::zero_sum_backward_workspace_bytes<scalar_t>(s, need_dx);
    at::Tensor ws = at::empty({static_cast<int64_t>(bytes)}, x.options().dtype(at::kByte));
    check(cuda::zero_sum_backward_cuda<scalar_t>(x.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(),
                                                 kern.data_ptr<scalar_t>(), weight.data_ptr<scalar_t>(),
                                                 need_dx ? dx.data_ptr<scalar_t>() : nullptr, dk.data_ptr<scalar_t>(),
                                                 dw.data_ptr<scalar_t>(), db.data_ptr<scalar_t>(), s, ws.data_ptr(),
                                                 bytes, current_stream()),
          "backward");
  });
  return {dx, theta_grad_cuda(dk.narrow(1, 0, M), theta, n_free), dw.narrow(1, 0, M).contiguous(), db};
}

}  // namespace diffnet::ops::detail
