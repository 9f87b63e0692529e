// Table lookup (an Embedding layer's forward) with a one-pass deterministic CPU backward: LibTorch 1.13's
// embedding backward on the CPU takes ~16 ms for the DCT branch's 0.5 M lookups into a 21-row table
// (docs/ops.md, "Embedding"); summing the gradient rows per table row in one pass takes a few.
#pragma once

#include <ATen/ATen.h>

namespace diffnet::ops {

// weight (V, D), indices int64 of any shape -> (indices..., D), exactly at::embedding(weight, indices).
// Once differentiable in weight. On the CPU for float32/float64 weights with V * D <= 65,536 the weight
// gradient is one pass over the output gradient: per block of lookups a (V, D) partial sum in double,
// blocks added in a fixed order (the same bits for any thread count). Anywhere else, and with
// $DIFFNET_EMBEDDING=aten: at::embedding and LibTorch's backward.
at::Tensor embedding(const at::Tensor& weight, const at::Tensor& indices);

// Whether embedding() uses its own backward for these arguments (see above).
bool embedding_uses_own_backward(const at::Tensor& weight, const at::Tensor& indices);

}  // namespace diffnet::ops
