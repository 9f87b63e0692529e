// The CPU pass of the embedding backward (include/diffnet/embedding.h). Raw pointers, no LibTorch types.
#pragma once

#include <cstdint>

namespace diffnet::ops::cpu {

// out (V, D) = for each table row v, the sum of the rows grad[i] (N, D) with idx[i] == v (idx in [0, V)).
// Partial sums over fixed blocks of lookups in double, added in block order.
template <typename T>
void embedding_grad(const T* grad, const int64_t* idx, int64_t N, int64_t D, int64_t V, T* out);

}  // namespace diffnet::ops::cpu
