// The CPU passes of the fused GRN and GELU + GRN (include/diffnet/grn.h) on channel-innermost tensors
// (B, P, C), P = H*W: per-channel sums over the positions of one image, a per-channel affine combination,
// and the same two with the GELU computed inside them.
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

// g = gelu(h) (erf form, cpu/gelu_math.h) and gg (B, C) = sum over p of g*g, in one pass; the same blocks
// and order as channel_sums.
template <typename T>
void gelu_channel_sums(const T* h, T* g, double* gg, const GrnShape& s);

// dh = (dy * a[b,c] + g * k[b,c]) * gelu'(h): GRN's input gradient (see channel_affine) taken through the GELU.
template <typename T>
void gelu_grn_input_grad(const T* dy, const T* a, const T* g, const T* k, const T* h, T* dh, const GrnShape& s);

// out = u * a[b,c] + (v ? v * k[b,c] : 0) + (bias ? bias[c] : 0); a and k are (B, C), bias (C).
template <typename T>
void channel_affine(const T* u, const T* a, const T* v, const T* k, const T* bias, T* out, const GrnShape& s);

}  // namespace diffnet::ops::cpu
