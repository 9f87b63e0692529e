// The CPU pass of the embedding backward (include/diffnet/embedding.h). Raw pointers, no LibTorch types.
#pragma once

#include <cstdint>

#include "diffnet/cpu_isa.h"

namespace diffnet::ops::cpu {

// out (V, D) = for each table row v, the sum of the rows grad[i] (N, D) with idx[i] == v (idx in [0, V)).
// Partial sums over fixed blocks of lookups in double, added in block order.
// Declared once per instruction-set level (diffnet/cpu_isa.h); the function below calls the level in use.
#define DN_EMBEDDING_KERNELS                                                                                  \
  template <typename T>                                                                                       \
  void embedding_grad(const T* grad, const int64_t* idx, int64_t N, int64_t D, int64_t V, T* out);
DIFFNET_CPU_FOR_EACH_ISA(DN_EMBEDDING_KERNELS)
#undef DN_EMBEDDING_KERNELS

template <typename T>
void embedding_grad(const T* grad, const int64_t* idx, int64_t N, int64_t D, int64_t V, T* out) {
  DIFFNET_CPU_DISPATCH(embedding_grad<T>(grad, idx, N, D, V, out))
}

}  // namespace diffnet::ops::cpu
