// The two CPU passes of the fused GRN (include/diffnet/grn.h) on channel-innermost tensors (B, P, C),
// P = H*W: per-channel sums over the positions of one image, and a per-channel affine combination.
// Raw pointers, no LibTorch types.
#pragma once

#include <cstdint>

namespace diffnet::ops::cpu {

struct GrnShape {
  int64_t B = 0, P = 0, C = 0;  // images, positions per image, channels (innermost)
};

// uv (B, C) = sum over p of u*v; when u_sum is not null, u_sum (B, C) = sum over p of u. Partial sums
// over fixed blocks of positions, added in double in a fixed order: the same bits for any thread count.
template <typename T>
void channel_sums(const T* u, const T* v, double* uv, double* u_sum, const GrnShape& s);

// out = u * a[b,c] + (v ? v * k[b,c] : 0) + (bias ? bias[c] : 0); a and k are (B, C), bias (C).
template <typename T>
void channel_affine(const T* u, const T* a, const T* v, const T* k, const T* bias, T* out, const GrnShape& s);

}  // namespace diffnet::ops::cpu
