// TEMPORARY placeholder until the fused kernels land (issue 3): falls back to the dense reference.
#include "diffnet/zero_sum.h"
namespace diffnet::ops {
at::Tensor zero_sum_fused(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                          const at::Tensor& bias, int64_t n_free) {
  return zero_sum_dense(x, theta, weight, bias, n_free, "abs");
}
bool zero_sum_has_cuda() { return false; }
}  // namespace diffnet::ops
