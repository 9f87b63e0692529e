// GELU in its erf form, y = h * Phi(h), with a vectorised CPU forward and backward: LibTorch 1.13 as
// Debian builds it computes erf one element at a time (the decoder head's GELU, 8 x 64 x 64 x 64 values:
// 3.4 ms against 0.1 ms for a ReLU; docs/ops.md, "GELU alone").
#pragma once

#include <ATen/ATen.h>

namespace diffnet::ops {

// Elementwise; any shape and layout (a tensor with dense, non-overlapping storage keeps its strides, any
// other is made contiguous). CPU float32/float64: our pass over the storage (cpu/gelu_math.h: float32 erf
// by Abramowitz & Stegun, absolute error <= 1.5e-7, as ATen's vectorised erf; float64 std::erf), once
// differentiable (dh = dy * gelu'(h), one pass). CPU bf16 without gradient (a bf16 model's inference):
// the same pass on bf16 storage in float32 arithmetic. Anywhere else, and with $DIFFNET_GELU=aten: at::gelu.
at::Tensor gelu(const at::Tensor& h);

// Whether gelu() uses our CPU pass for this argument (see above).
bool gelu_uses_own_kernel(const at::Tensor& h);

}  // namespace diffnet::ops
