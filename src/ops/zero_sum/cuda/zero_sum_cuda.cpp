// Thin LibTorch binding of the CUDA kernels (built only with DIFFNET_CUDA=ON): allocates outputs and
// scratch through the caching allocator and launches on the current stream of the input's device.
// Only c10/cuda headers (CUDA runtime API), not ATen/cuda/CUDAContext.h (which pulls in cuBLAS/cuSPARSE/
// cuSOLVER headers that must then match the toolkit PyTorch was built with).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cmath>
#include <string>

#include "diffnet/common.h"
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

}  // namespace

at::Tensor full_kernels_cuda(const at::Tensor& theta_in, int64_t n_free) {
  c10::cuda::CUDAGuard guard(theta_in.device());
  at::Tensor theta = theta_in.contiguous();
  const int64_t C = theta.size(0), M = theta.size(1), KK = theta.size(2) + 1;
  const int64_t K = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(KK))));
  at::Tensor kern = at::empty({C, M, KK}, theta.options());
  if (theta.scalar_type() == at::kDouble)
    check(cuda::zero_sum_full_kernels_cuda<double>(theta.data_ptr<double>(), kern.data_ptr<double>(), C, M, n_free, K,
                                                   current_stream()),
          "coefficients");
  else
    check(cuda::zero_sum_full_kernels_cuda<float>(theta.data_ptr<float>(), kern.data_ptr<float>(), C, M, n_free, K,
                                                  current_stream()),
          "coefficients");
  return kern;
}

at::Tensor theta_grad_cuda(const at::Tensor& dkern_in, const at::Tensor& theta_in, int64_t n_free) {
  c10::cuda::CUDAGuard guard(theta_in.device());
  at::Tensor dkern = dkern_in.contiguous(), theta = theta_in.contiguous();
  const int64_t C = theta.size(0), M = theta.size(1), KK = theta.size(2) + 1;
  const int64_t K = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(KK))));
  at::Tensor dtheta = at::empty_like(theta);
  if (theta.scalar_type() == at::kDouble)
    check(cuda::zero_sum_theta_grad_cuda<double>(dkern.data_ptr<double>(), theta.data_ptr<double>(),
                                                 dtheta.data_ptr<double>(), C, M, n_free, K, current_stream()),
          "theta gradient");
  else
    check(cuda::zero_sum_theta_grad_cuda<float>(dkern.data_ptr<float>(), theta.data_ptr<float>(),
                                                dtheta.data_ptr<float>(), C, M, n_free, K, current_stream()),
          "theta gradient");
  return dtheta;
}

at::Tensor fused_forward_cuda(const at::Tensor& x, const at::Tensor& kern, const at::Tensor& weight,
                              const at::Tensor& bias) {
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty(x.sizes(), x.options());
  const cuda::ZeroSumShape s = shape_of(x, kern);
  if (x.scalar_type() == at::kDouble)
    check(cuda::zero_sum_forward_cuda<double>(x.data_ptr<double>(), kern.data_ptr<double>(), weight.data_ptr<double>(),
                                              bias.data_ptr<double>(), out.data_ptr<double>(), s, current_stream()),
          "forward");
  else
    check(cuda::zero_sum_forward_cuda<float>(x.data_ptr<float>(), kern.data_ptr<float>(), weight.data_ptr<float>(),
                                             bias.data_ptr<float>(), out.data_ptr<float>(), s, current_stream()),
          "forward");
  return out;
}

std::vector<at::Tensor> fused_backward_cuda(const at::Tensor& x, const at::Tensor& grad, const at::Tensor& kern,
                                            const at::Tensor& weight, bool need_dx) {
  c10::cuda::CUDAGuard guard(x.device());
  const cuda::ZeroSumShape s = shape_of(x, kern);
  at::Tensor dx = need_dx ? at::empty(x.sizes(), x.options()) : at::Tensor();
  at::Tensor dk = at::empty(kern.sizes(), x.options());
  at::Tensor dw = at::empty(weight.sizes(), x.options());
  at::Tensor db = at::empty({s.C}, x.options());
  const bool dbl = x.scalar_type() == at::kDouble;
  const size_t bytes = dbl ? cuda::zero_sum_backward_workspace_bytes<double>(s, need_dx)
                           : cuda::zero_sum_backward_workspace_bytes<float>(s, need_dx);
  at::Tensor ws = at::empty({static_cast<int64_t>(bytes)}, x.options().dtype(at::kByte));
  if (dbl)
    check(cuda::zero_sum_backward_cuda<double>(x.data_ptr<double>(), grad.data_ptr<double>(), kern.data_ptr<double>(),
                                               weight.data_ptr<double>(), need_dx ? dx.data_ptr<double>() : nullptr,
                                               dk.data_ptr<double>(), dw.data_ptr<double>(), db.data_ptr<double>(), s,
                                               ws.data_ptr(), bytes, current_stream()),
          "backward");
  else
    check(cuda::zero_sum_backward_cuda<float>(x.data_ptr<float>(), grad.data_ptr<float>(), kern.data_ptr<float>(),
                                              weight.data_ptr<float>(), need_dx ? dx.data_ptr<float>() : nullptr,
                                              dk.data_ptr<float>(), dw.data_ptr<float>(), db.data_ptr<float>(), s,
                                              ws.data_ptr(), bytes, current_stream()),
          "backward");
  return {dx, dk, dw, db};
}

}  // namespace diffnet::ops::detail
