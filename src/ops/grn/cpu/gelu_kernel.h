// The CPU passes of the standalone GELU (include/diffnet/gelu.h) over n stored values: the value and its
// input gradient. Raw pointers, no LibTorch types.
#pragma once

#include <cstdint>

namespace diffnet::ops::cpu {

// y[i] = gelu(h[i]) in compute_t<S> (cpu/gelu_math.h), stored as S (float, double or Bf16).
template <typename S>
void gelu_values(const S* h, S* y, int64_t n);

// dh[i] = dy[i] * gelu'(h[i]) (float or double).
template <typename T>
void gelu_input_grad(const T* dy, const T* h, T* dh, int64_t n);

}  // namespace diffnet::ops::cpu
