// The zero-sum discrepancy operator of docs/design.md §2.4, behind one interface with two implementations:
//   dense  — materialised K×K kernels + reflect pad + depthwise conv + activation + projection (reference)
//   fused  — hand-written forward/backward (CPU; CUDA when built with DIFFNET_CUDA), abs only
// Shapes: x (B,C,H,W); theta (C,M,K*K-1) neighbour coefficients in raster order skipping the centre;
// weight (C,M); bias (C). Filters m < n_free are free (a = theta), the rest centre-anchored (a = |theta|).
// u_{c,m}(p) = sum_{d != 0} a_{c,m,d} x~(p+d) - s_{c,m} x(p), s = sum_d a (x~: iterated reflection, so any
// map size works, also maps smaller than the radius). Output T_c = sum_m weight[c,m] act(u_{c,m}) + bias[c].
// Layout: inputs may have any strides (channels_last, non-contiguous views). The fused op returns the
// input's layout (channels_last in -> channels_last out, else contiguous NCHW); dense returns whatever its
// LibTorch composition produces.
// Details, measured speeds and limits: docs/ops.md.
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace diffnet::ops {

// Kernel side K from theta's last dimension (K*K-1); throws for sizes that are not an odd square minus one.
int64_t zero_sum_kernel_size(const at::Tensor& theta);

// Materialised kernels (C, M, K, K): a at the neighbours, -s at the centre (sums to zero per filter).
at::Tensor zero_sum_kernels(const at::Tensor& theta, int64_t n_free);

// Index of x~ for coordinate i in [-(r), n-1+r] with iterated reflection (no edge repeat), n >= 1.
int64_t reflect_index(int64_t i, int64_t n);

// Reflection padding by r on H and W with iterated reflection (works for any map size; differentiable).
at::Tensor reflect_pad_any(const at::Tensor& x, int64_t r);

// Depthwise multi-filter correlation with reflection padding: x (B,C,H,W), kernels (C,M,K,K)
// -> (B,C,M,H,W). Differentiable (LibTorch ops).
at::Tensor depthwise_multi(const at::Tensor& x, const at::Tensor& kernels);

// Reference implementation (the best dense LibTorch composition, see docs/ops.md).
// activation: "abs" | "none" | "tanh".
at::Tensor zero_sum_dense(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                          const at::Tensor& bias, int64_t n_free, const std::string& activation = "abs");

// Fused training operator (abs only), autograd-enabled; CPU float32/float64, CUDA when compiled in.
// K in {3, 5, 7, 9}, 1 <= M <= 4 (other sizes: Error suggesting dense). Gradients for x, theta, weight
// and bias (theta of anchored filters: sign(theta) * g with sign(0) = 0); weight gradients are
// deterministic (bit-identical run after run, any thread count). Not twice differentiable.
at::Tensor zero_sum_fused(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                          const at::Tensor& bias, int64_t n_free);

// Dispatch by name: "dense" | "fused". Throws for unknown names or fused with activation != "abs".
at::Tensor zero_sum(const at::Tensor& x, const at::Tensor& theta, const at::Tensor& weight,
                    const at::Tensor& bias, int64_t n_free, const std::string& impl,
                    const std::string& activation = "abs");

// True when this build has the CUDA kernels.
bool zero_sum_has_cuda();
// True when this build has the CUDA kernels and a CUDA device is usable.
bool zero_sum_cuda_available();

// ---- Inference (docs/design.md §2.4, item 3): materialise once after loading weights, then run without autograd.
struct ZeroSumCoefficients {
  at::Tensor kernels;  // (C, M, K*K) full kernels: a at the neighbours, -s at the centre (detached)
  at::Tensor weight;   // (C, M)
  at::Tensor bias;     // (C)
  int64_t K = 0;
};

// Computes the full kernels from theta once (no autograd). Re-run after the weights change.
ZeroSumCoefficients zero_sum_materialize(const at::Tensor& theta, const at::Tensor& weight,
                                         const at::Tensor& bias, int64_t n_free);

// The faster inference path on a device ("fused" | "dense"), from the measurements in docs/ops.md.
std::string zero_sum_infer_default(const at::Device& device);

// No-grad forward with materialised coefficients. impl: "fused" | "dense" | "auto" (zero_sum_infer_default).
// Coefficients are moved to x's device/dtype if needed (cache them there to avoid the copy).
at::Tensor zero_sum_infer(const at::Tensor& x, const ZeroSumCoefficients& coeffs, const std::string& impl = "auto",
                          const std::string& activation = "abs");

}  // namespace diffnet::ops
