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

// Fused operator (abs only), autograd-enabled: the registered op diffnet::zero_sum_fused with kernels for
// CPU and CUDA (when compiled in), float32/float64, and for autocast (bf16/fp16 inputs under autocast run
// in float32 and return float32).
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

// The one place the implementation of a filter bank is chosen. The fused op applies to zero-sum filters
// with the abs activation (zero_sum_fused_applies); elsewhere the bank runs dense. Where it applies, fused
// runs when requested ("fused", the configuration's default), and in inference (no gradients) whatever
// the configuration says unless dense was `forced` for this run (set_disc_impl): it is the faster path on
// every shape measured (docs/ops.md). Returns "fused" | "dense"; throws for an unknown `requested`.
bool zero_sum_fused_applies(const std::string& filter, const std::string& activation);
std::string zero_sum_impl_for(const std::string& filter, const std::string& activation, const std::string& requested,
                              bool forced, bool inference);

}  // namespace diffnet::ops
