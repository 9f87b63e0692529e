// The CPU passes of the fused GRN and GELU + GRN (include/diffnet/grn.h) on channel-innermost tensors
// (B, P, C), P = H*W: per-channel sums over the positions of one image, a per-channel affine combination,
// and the same two with the GELU computed inside them.
// Raw pointers, no LibTorch types.
#pragma once

#include <cstdint>
#include <cstring>

#include "diffnet/cpu_isa.h"

namespace diffnet::ops::cpu {

struct GrnShape {
  int64_t B = 0, P = 0, C = 0;  // images, positions per image, channels (innermost)
};

// bfloat16 storage (the upper half of a float32's bits), for the inference passes on bf16 activations:
// loaded exactly into float, stored rounded to nearest even (NaN stays NaN), as LibTorch rounds.
struct Bf16 {
  uint16_t bits;
};

// The arithmetic type of a storage type: float and double compute in themselves, Bf16 in float.
template <typename S>
struct ComputeOf {
  using type = S;
};
template <>
struct ComputeOf<Bf16> {
  using type = float;
};
template <typename S>
using compute_t = typename ComputeOf<S>::type;

inline float load(float v) { return v; }
inline double load(double v) { return v; }
inline float load(Bf16 v) {
  const uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline void store(float& out, float v) { out = v; }
inline void store(double& out, double v) { out = v; }
inline void store(Bf16& out, float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  out.bits = static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FC0u : rounded);
}

// The passes, each declared once per instruction-set level (diffnet/cpu_isa.h); the functions of the same
// names below call the level in use. Contracts:
//
// channel_sums: uv (B, C) = sum over p of u*v; when u_sum is not null, u_sum (B, C) = sum over p of u.
// Partial sums over fixed blocks of positions (in compute_t<S>), added in double in a fixed order: the
// same bits for any thread count. S: float, double or Bf16 (stored values; Bf16 sums in float).
//
// gelu_channel_sums: g = gelu(h) (erf form, cpu/gelu_math.h, computed in compute_t<S> and stored as S) and
// gg (B, C) = sum over p of g*g of the stored g, in one pass; the same blocks and order as channel_sums.
//
// gelu_grn_input_grad: dh = (dy * a[b,c] + g * k[b,c]) * gelu'(h): GRN's input gradient (see
// channel_affine) taken through the GELU.
//
// channel_affine: out = u * a[b,c] + (v ? v * k[b,c] : 0) + (bias ? bias[c] : 0); a and k are (B, C), bias
// (C), all three in compute_t<S>; u, v and out stored as S.
#define DN_GRN_KERNELS                                                                                        \
  template <typename S>                                                                                       \
  void channel_sums(const S* u, const S* v, double* uv, double* u_sum, const GrnShape& s);                    \
  template <typename S>                                                                                       \
  void gelu_channel_sums(const S* h, S* g, double* gg, const GrnShape& s);                                    \
  template <typename T>                                                                                       \
  void gelu_grn_input_grad(const T* dy, const T* a, const T* g, const T* k, const T* h, T* dh,                \
                           const GrnShape& s);                                                                \
  template <typename S>                                                                                       \
  void channel_affine(const S* u, const compute_t<S>* a, const S* v, const compute_t<S>* k,                   \
                      const compute_t<S>* bias, S* out, const GrnShape& s);
DIFFNET_CPU_FOR_EACH_ISA(DN_GRN_KERNELS)
#undef DN_GRN_KERNELS

template <typename S>
void channel_sums(const S* u, const S* v, double* uv, double* u_sum, const GrnShape& s) {
  DIFFNET_CPU_DISPATCH(channel_sums<S>(u, v, uv, u_sum, s))
}
template <typename S>
void gelu_channel_sums(const S* h, S* g, double* gg, const GrnShape& s) {
  DIFFNET_CPU_DISPATCH(gelu_channel_sums<S>(h, g, gg, s))
}
template <typename T>
void gelu_grn_input_grad(const T* dy, const T* a, const T* g, const T* k, const T* h, T* dh, const GrnShape& s) {
  DIFFNET_CPU_DISPATCH(gelu_grn_input_grad<T>(dy, a, g, k, h, dh, s))
}
template <typename S>
void channel_affine(const S* u, const compute_t<S>* a, const S* v, const compute_t<S>* k, const compute_t<S>* bias,
                    S* out, const GrnShape& s) {
  DIFFNET_CPU_DISPATCH(channel_affine<S>(u, a, v, k, bias, out, s))
}

}  // namespace diffnet::ops::cpu
