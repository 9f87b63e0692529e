// The CPU passes of the standalone GELU (include/diffnet/gelu.h) over n stored values: the value and its
// input gradient. Raw pointers, no LibTorch types.
#pragma once

#include <cstdint>

#include "diffnet/cpu_isa.h"

namespace diffnet::ops::cpu {

// Declared once per instruction-set level (diffnet/cpu_isa.h); the functions below call the level in use.
// gelu_values: y[i] = gelu(h[i]) in compute_t<S> (cpu/gelu_math.h), stored as S (float, double or Bf16).
// gelu_input_grad: dh[i] = dy[i] * gelu'(h[i]) (float or double).
#define DN_GELU_KERNELS                                                                                       \
  template <typename S>                                                                                       \
  void gelu_values(const S* h, S* y, int64_t n);                                                              \
  template <typename T>                                                                                       \
  void gelu_input_grad(const T* dy, const T* h, T* dh, int64_t n);
DIFFNET_CPU_FOR_EACH_ISA(DN_GELU_KERNELS)
#undef DN_GELU_KERNELS

template <typename S>
void gelu_values(const S* h, S* y, int64_t n) {
  DIFFNET_CPU_DISPATCH(gelu_values<S>(h, y, n))
}
template <typename T>
void gelu_input_grad(const T* dy, const T* h, T* dh, int64_t n) {
  DIFFNET_CPU_DISPATCH(gelu_input_grad<T>(dy, h, dh, n))
}

}  // namespace diffnet::ops::cpu
