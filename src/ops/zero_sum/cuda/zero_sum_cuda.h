// Launcher API of the CUDA kernels of the fused zero-sum operator: plain C++ (no CUDA or torch headers),
// device pointers, contiguous NCHW planes, the same contracts as cpu/zero_sum_kernel.h. The kernels
// (zero_sum_kernel.cu) include no torch header, so they compile with nvcc alone; the LibTorch binding is
// zero_sum_cuda.cpp (built only with DIFFNET_CUDA=ON).
//
// Tiles (docs/design.md §2.4): 16x16 when min(H, W) >= 64 and K <= 5, 16x8 when K = 7, else 8x8; one thread per
// output pixel, the reflected input tile and the coefficients in shared memory, K and M compile-time.
// Weight gradients: per-block partials (fixed-order tree / loops in shared memory), then one kernel sums
// them over (batch, tile) in a fixed order: bit-identical results run after run, no atomics.
#pragma once

#include <cstddef>
#include <cstdint>

namespace diffnet::ops::cuda {

struct ZeroSumShape {
  int64_t B = 0, C = 0, H = 0, W = 0;  // input (B, C, H, W)
  int64_t M = 0, K = 0;                // filters per channel, kernel side
};

// True when kernels are instantiated for this K and M (K in {3,5,7,9}, M in {1,2,4}).
bool zero_sum_cuda_supported(int64_t K, int64_t M);

// Tile chosen for a shape: width x height in pixels.
void zero_sum_cuda_tile(const ZeroSumShape& s, int* tile_w, int* tile_h);

// All functions return a cudaError_t value (0 = success); stream is a cudaStream_t (nullptr = default).
// out = sum_m weight[c,m] |corr(x~, kern[c,m])| + bias[c]; kern (C, M, K*K) full kernels.
template <typename T>
int zero_sum_forward_cuda(const T* x, const T* kern, const T* weight, const T* bias, T* out,
                          const ZeroSumShape& s, void* stream);

// Scratch bytes zero_sum_backward_cuda needs for this shape.
template <typename T>
size_t zero_sum_backward_workspace_bytes(const ZeroSumShape& s, bool need_dx);

// Backward: dx (B,C,H,W) (skipped when null), dkern (C,M,K*K), dweight (C,M), dbias (C), all written
// (not accumulated). workspace: device memory of zero_sum_backward_workspace_bytes(s, dx != nullptr).
template <typename T>
int zero_sum_backward_cuda(const T* x, const T* g, const T* kern, const T* weight, T* dx, T* dkern,
                           T* dweight, T* dbias, const ZeroSumShape& s, void* workspace, size_t workspace_bytes,
                           void* stream);

// Full kernels (C, M, K*K) from theta (C, M, K*K-1): filters m >= n_free use |theta|; centre = -sum(a).
template <typename T>
int zero_sum_full_kernels_cuda(const T* theta, T* kern, int64_t C, int64_t M, int64_t n_free, int64_t K,
                               void* stream);

// dtheta (C, M, K*K-1) from the full-kernel gradient dkern (C, M, K*K).
template <typename T>
int zero_sum_theta_grad_cuda(const T* dkern, const T* theta, T* dtheta, int64_t C, int64_t M, int64_t n_free,
                             int64_t K, void* stream);

// cudaGetErrorString for a code returned above. (Device queries and synchronisation: diffnet/device.h.)
const char* zero_sum_cuda_error_string(int code);

}  // namespace diffnet::ops::cuda
