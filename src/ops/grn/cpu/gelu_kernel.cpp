// The standalone GELU's CPU passes (cpu/gelu_kernel.h): chunks of the storage in parallel, each a plain
// loop the compiler vectorises under -march (the arithmetic of cpu/gelu_math.h has no libm call).
#include "ops/grn/cpu/gelu_kernel.h"

#include <ATen/Parallel.h>

#include "ops/grn/cpu/gelu_math.h"
#include "ops/grn/cpu/grn_kernel.h"

namespace diffnet::ops::cpu {
namespace {
constexpr int64_t kGrain = 1 << 14;  // values per task: below this one thread does the whole pass
}  // namespace

template <typename S>
void gelu_values(const S* h, S* y, int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) store(y[i], gelu_value(load(h[i])));
  });
}

template <typename T>
void gelu_input_grad(const T* dy, const T* h, T* dh, int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) dh[i] = dy[i] * gelu_derivative(h[i]);
  });
}

template void gelu_values<float>(const float*, float*, int64_t);
template void gelu_values<double>(const double*, double*, int64_t);
template void gelu_values<Bf16>(const Bf16*, Bf16*, int64_t);
template void gelu_input_grad<float>(const float*, const float*, float*, int64_t);
template void gelu_input_grad<double>(const double*, const double*, double*, int64_t);

}  // namespace diffnet::ops::cpu
