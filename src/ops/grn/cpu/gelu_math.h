// GELU in its erf form, y = h * Phi(h), and its derivative Phi(h) + h * phi(h), per element, for the fused
// GELU + GRN passes (cpu/grn_kernel.h). The float versions are branch-free arithmetic the compiler
// vectorises inside a loop (no libm call): erf by Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7,
// the formula ATen's vectorised erf uses too) and exp(-z^2) by a Cephes-style range reduction and
// polynomial (about 1 ulp), shared by Phi and phi. The double versions call std::erf and std::exp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace diffnet::ops::cpu {

// exp(x) for x <= 0 (x below -87 gives exp(-87), about 1.6e-38: every use multiplies it by a value <= 1,
// so it stands for 0).
inline float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  x = x < -87.0f ? -87.0f : x;
  // n = round(x / ln 2) for x <= 0: truncation of the positive 0.5 - x / ln 2 is its floor.
  const int32_t ni = -static_cast<int32_t>(0.5f - x * kLog2e);
  const float n = static_cast<float>(ni);
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;  // |r| <= ln(2) / 2
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (ni + 127) << 23;  // 2^n, n in [-126, 0]
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// Phi(h) = (1 + erf(h / sqrt 2)) / 2 and e = exp(-h^2 / 2) (which phi(h) = e / sqrt(2 pi) needs).
inline void normal_cdf_and_exp(float h, float& cdf, float& e) {
  constexpr float kInvSqrt2 = 0.70710678118654752f, kP = 0.3275911f;
  constexpr float kA1 = 0.254829592f, kA2 = -0.284496736f, kA3 = 1.421413741f, kA4 = -1.453152027f,
                  kA5 = 1.061405429f;
  const float z = (h < 0.0f ? -h : h) * kInvSqrt2;
  const float t = 1.0f / (1.0f + kP * z);
  e = exp_nonpositive(-z * z);
  const float poly = ((((kA5 * t + kA4) * t + kA3) * t + kA2) * t + kA1) * t;
  const float tail = 0.5f * poly * e;  // (1 - erf(|h| / sqrt 2)) / 2 = Phi(-|h|)
  cdf = h < 0.0f ? tail : 1.0f - tail;
}

inline float gelu_value(float h) {
  float cdf, e;
  normal_cdf_and_exp(h, cdf, e);
  return h * cdf;
}

inline float gelu_derivative(float h) {
  constexpr float kInvSqrt2Pi = 0.39894228040143268f;
  float cdf, e;
  normal_cdf_and_exp(h, cdf, e);
  return cdf + h * (e * kInvSqrt2Pi);
}

inline double gelu_value(double h) { return 0.5 * h * (1.0 + std::erf(h * 0.70710678118654752440)); }

inline double gelu_derivative(double h) {
  return 0.5 * (1.0 + std::erf(h * 0.70710678118654752440)) + h * std::exp(-0.5 * h * h) * 0.39894228040143267794;
}

}  // namespace diffnet::ops::cpu
