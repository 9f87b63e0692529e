// CUDA kernels of the fused zero-sum operator (see zero_sum_cuda.h for the contracts). Raw CUDA: no torch
// header, so `nvcc -std=c++17 -c` compiles this file on any machine with the toolkit.
//
// forward     one thread per output pixel; the block's reflected input tile (with a halo of R) and the
//             channel's coefficients in shared memory; M accumulators over the K*K taps, abs + projection.
// backward 1  recompute u per pixel, gu_m = g w_m sign(u_m) to global scratch and shared memory; per-block
//             partials of dweight/dbias (fixed tree) and dkern (each tap summed over the tile's pixels in a
//             fixed order, split over thread groups that are then summed in order).
// backward 2  one thread per (channel, value) sums the partials over (batch, tile) in a fixed order.
// backward 3  halo-extended input gradient dxp = correlation of zero-extended gu with the flipped kernels.
// backward 4  fold: each dx pixel sums its preimages under the reflection (interior + halo), fixed order.
// No atomics anywhere: the same inputs give bit-identical outputs.
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/zero_sum/cuda/zero_sum_cuda.h"

namespace diffnet::ops::cuda {
namespace {

constexpr int kMaxGridZ = 65535;

__host__ __device__ inline int reflect_i(int i, int n) {
  if (n == 1) return 0;
  const int period = 2 * (n - 1);
  int m = i % period;
  if (m < 0) m += period;
  return m < n ? m : period - m;
}

template <typename T>
__device__ inline T abs_t(T v) {
  return v < T(0) ? -v : v;
}

template <typename T>
__device__ inline T times_sign(T gw, T u) {
  return u > T(0) ? gw : (u < T(0) ? -gw : T(0));
}

// Loads the reflected input tile of a TX x TY block with a halo of R into shared memory.
template <typename T, int K, int TX, int TY>
__device__ inline void load_tile(const T* __restrict__ xs, T (*tile)[TX + 2 * (K / 2)], int x0, int y0, int H,
                                 int W, int tid) {
  constexpr int R = K / 2, SW = TX + 2 * R, SH = TY + 2 * R;
  for (int i = tid; i < SH * SW; i += TX * TY) {
    const int ty = i / SW, tx = i % SW;
    const int gy = reflect_i(y0 + ty - R, H), gx = reflect_i(x0 + tx - R, W);
    tile[ty][tx] = xs[static_cast<int64_t>(gy) * W + gx];
  }
}

// This thread's M filter responses u[m] at its pixel: the K x K neighbourhood of the shared tile
// (top-left corner at the thread's own position) times filter m's full kernel in coef (M x K*K).
template <typename T, int K, int M, int TX>
__device__ __forceinline__ void responses(const T (*tile)[TX + 2 * (K / 2)], const T* coef, T (&u)[M]) {
  constexpr int KK = K * K;
#pragma unroll
  for (int m = 0; m < M; ++m) u[m] = T(0);
#pragma unroll
  for (int dy = 0; dy < K; ++dy)
#pragma unroll
    for (int dx = 0; dx < K; ++dx) {
      const T v = tile[threadIdx.y + dy][threadIdx.x + dx];
#pragma unroll
      for (int m = 0; m < M; ++m) u[m] += coef[m * KK + dy * K + dx] * v;
    }
}

template <typename T, int K, int M, int TX, int TY>
__global__ void __launch_bounds__(TX* TY)
    forward_kernel(const T* __restrict__ x, const T* __restrict__ kern, const T* __restrict__ weight,
                   const T* __restrict__ bias, T* __restrict__ out, int C, int H, int W, int64_t plane0) {
  constexpr int R = K / 2, KK = K * K;
  __shared__ T tile[TY + 2 * R][TX + 2 * R];
  __shared__ T coef[M * KK];
  __shared__ T wsh[M];
  const int tid = threadIdx.y * TX + threadIdx.x;
  const int64_t plane = plane0 + blockIdx.z;
  const int c = static_cast<int>(plane % C);
  const int x0 = blockIdx.x * TX, y0 = blockIdx.y * TY;
  const int64_t HW = static_cast<int64_t>(H) * W;
  for (int i = tid; i < M * KK; i += TX * TY) coef[i] = kern[static_cast<int64_t>(c) * M * KK + i];
  if (tid < M) wsh[tid] = weight[c * M + tid];
  load_tile<T, K, TX, TY>(x + plane * HW, tile, x0, y0, H, W, tid);
  __syncthreads();
  const int px = x0 + threadIdx.x, py = y0 + threadIdx.y;
  if (px >= W || py >= H) return;
  T u[M];
  responses<T, K, M, TX>(tile, coef, u);
  T o = bias[c];
#pragma unroll
  for (int m = 0; m < M; ++m) o += wsh[m] * abs_t(u[m]);
  out[plane * HW + static_cast<int64_t>(py) * W + px] = o;
}

// Backward 1: gu to global scratch, per-block partials of dkern (taps), dweight (M) and dbias (1).
template <typename T, int K, int M, int TX, int TY>
__global__ void __launch_bounds__(TX* TY)
    grad_u_kernel(const T* __restrict__ x, const T* __restrict__ g, const T* __restrict__ kern,
                  const T* __restrict__ weight, T* __restrict__ gu, T* __restrict__ part_k, T* __restrict__ part_w,
                  T* __restrict__ part_b, int C, int H, int W, int64_t plane0) {
  constexpr int R = K / 2, KK = K * K, NT = TX * TY, TAPS = M * KK;
  __shared__ T tile[TY + 2 * R][TX + 2 * R];
  __shared__ T coef[TAPS];
  __shared__ T wsh[M];
  __shared__ T sgu[M][TY][TX];
  __shared__ T red[NT];
  const int tid = threadIdx.y * TX + threadIdx.x;
  const int64_t plane = plane0 + blockIdx.z;
  const int c = static_cast<int>(plane % C);
  const int x0 = blockIdx.x * TX, y0 = blockIdx.y * TY;
  const int64_t HW = static_cast<int64_t>(H) * W;
  const int64_t ntiles = static_cast<int64_t>(gridDim.x) * gridDim.y;
  const int64_t blk = plane * ntiles + static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
  for (int i = tid; i < TAPS; i += NT) coef[i] = kern[static_cast<int64_t>(c) * TAPS + i];
  if (tid < M) wsh[tid] = weight[c * M + tid];
  load_tile<T, K, TX, TY>(x + plane * HW, tile, x0, y0, H, W, tid);
  __syncthreads();

  const int px = x0 + threadIdx.x, py = y0 + threadIdx.y;
  const bool valid = px < W && py < H;
  T u[M];
  responses<T, K, M, TX>(tile, coef, u);
  const int64_t p = static_cast<int64_t>(py) * W + px;
  const T gv = valid ? g[plane * HW + p] : T(0);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const T gum = times_sign(gv * wsh[m], u[m]);
    sgu[m][threadIdx.y][threadIdx.x] = gum;
    if (valid) gu[(plane * M + m) * HW + p] = gum;
  }

  // dweight_m = sum g |u_m|, dbias = sum g: fixed-shape tree reductions.
#pragma unroll
  for (int m = 0; m <= M; ++m) {
    T v = gv;
#pragma unroll
    for (int mm = 0; mm < M; ++mm)
      if (mm == m) v = gv * abs_t(u[mm]);
    red[tid] = v;
    __syncthreads();
    for (int s = NT / 2; s > 0; s >>= 1) {
      if (tid < s) red[tid] += red[tid + s];
      __syncthreads();
    }
    if (tid == 0) {
      if (m < M) part_w[blk * M + m] = red[0];
      else part_b[blk] = red[0];
    }
    __syncthreads();
  }

  // dkern partials: tap (m, dy, dx) = sum over the tile's pixels of gu_m(p) x~(p + (dy-R, dx-R)).
  if constexpr (TAPS >= NT) {
    for (int t = tid; t < TAPS; t += NT) {
      const int m = t / KK, r = t % KK, dy = r / K, dx = r % K;
      T acc = T(0);
      for (int qy = 0; qy < TY; ++qy)
#pragma unroll
        for (int qx = 0; qx < TX; ++qx) acc += sgu[m][qy][qx] * tile[qy + dy][qx + dx];
      part_k[blk * TAPS + t] = acc;
    }
  } else {
    constexpr int S = NT / TAPS;  // thread groups splitting the pixels of each tap
    const int t = tid % TAPS, grp = tid / TAPS;
    T acc = T(0);
    if (grp < S) {
      const int m = t / KK, r = t % KK, dy = r / K, dx = r % K;
      for (int q = grp; q < NT; q += S) {
        const int qy = q / TX, qx = q % TX;
        acc += sgu[m][qy][qx] * tile[qy + dy][qx + dx];
      }
    }
    red[tid] = acc;
    __syncthreads();
    if (tid < TAPS) {
      T s = T(0);
      for (int q = 0; q < S; ++q) s += red[q * TAPS + tid];
      part_k[blk * TAPS + tid] = s;
    }
  }
}

// Backward 2: fixed-order sums of the per-block partials over (batch, tile), accumulated in double.
template <typename T>
__global__ void reduce_partials_kernel(const T* __restrict__ part_k, const T* __restrict__ part_w,
                                       const T* __restrict__ part_b, T* __restrict__ dkern, T* __restrict__ dweight,
                                       T* __restrict__ dbias, int B, int C, int M, int taps, int64_t ntiles) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nk = static_cast<int64_t>(C) * taps, nw = static_cast<int64_t>(C) * M;
  if (idx < nk) {
    const int64_t c = idx / taps, t = idx % taps;
    double acc = 0;
    for (int b = 0; b < B; ++b)
      for (int64_t i = 0; i < ntiles; ++i) acc += part_k[((b * C + c) * ntiles + i) * taps + t];
    if (dkern) dkern[idx] = static_cast<T>(acc);
  } else if (idx < nk + nw) {
    const int64_t j = idx - nk, c = j / M, m = j % M;
    double acc = 0;
    for (int b = 0; b < B; ++b)
      for (int64_t i = 0; i < ntiles; ++i) acc += part_w[((b * C + c) * ntiles + i) * M + m];
    if (dweight) dweight[j] = static_cast<T>(acc);
  } else if (idx < nk + nw + C) {
    const int64_t c = idx - nk - nw;
    double acc = 0;
    for (int b = 0; b < B; ++b)
      for (int64_t i = 0; i < ntiles; ++i) acc += part_b[(b * C + c) * ntiles + i];
    if (dbias) dbias[c] = static_cast<T>(acc);
  }
}

// Backward 3: dxp (planes, H+2R, W+2R): dxp(P, Q) = sum_m sum_t kflip_m(t) gu_m(P - 2R + ty, Q - 2R + tx),
// gu zero outside the map; dxp(P, Q) is the gradient of x~ at (P - R, Q - R).
template <typename T, int K, int M, int TX, int TY>
__global__ void __launch_bounds__(TX* TY)
    input_grad_halo_kernel(const T* __restrict__ gu, const T* __restrict__ kern, T* __restrict__ dxp, int C, int H,
                           int W, int64_t plane0) {
  constexpr int R = K / 2, KK = K * K, NT = TX * TY, SW = TX + 2 * R, SH = TY + 2 * R;
  __shared__ T sg[M][SH][SW];
  __shared__ T kf[M * KK];
  const int tid = threadIdx.y * TX + threadIdx.x;
  const int64_t plane = plane0 + blockIdx.z;
  const int c = static_cast<int>(plane % C);
  const int Hd = H + 2 * R, Wd = W + 2 * R;
  const int Q0 = blockIdx.x * TX, P0 = blockIdx.y * TY;
  const int64_t HW = static_cast<int64_t>(H) * W;
  for (int i = tid; i < M * KK; i += NT) {
    const int m = i / KK, t = i % KK;
    kf[i] = kern[(static_cast<int64_t>(c) * M + m) * KK + (KK - 1 - t)];
  }
  for (int i = tid; i < M * SH * SW; i += NT) {
    const int m = i / (SH * SW), r = i % (SH * SW), ty = r / SW, tx = r % SW;
    const int gy = P0 + ty - 2 * R, gx = Q0 + tx - 2 * R;
    sg[m][ty][tx] = (gy >= 0 && gy < H && gx >= 0 && gx < W)
                        ? gu[(plane * M + m) * HW + static_cast<int64_t>(gy) * W + gx]
                        : T(0);
  }
  __syncthreads();
  const int Q = Q0 + threadIdx.x, P = P0 + threadIdx.y;
  if (P >= Hd || Q >= Wd) return;
  T acc = T(0);
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int ty = 0; ty < K; ++ty)
#pragma unroll
      for (int tx = 0; tx < K; ++tx) acc += kf[m * KK + ty * K + tx] * sg[m][threadIdx.y + ty][threadIdx.x + tx];
  dxp[plane * static_cast<int64_t>(Hd) * Wd + static_cast<int64_t>(P) * Wd + Q] = acc;
}

// Backward 4: dx(i, j) = sum of dxp(P, Q) over every (P, Q) whose reflected source is (i, j), in ascending
// (P, Q) order (interior position P = i + R plus the halo rows/columns that mirror onto i / j).
template <typename T>
__global__ void fold_kernel(const T* __restrict__ dxp, T* __restrict__ dx, int64_t planes, int H, int W, int R) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t HW = static_cast<int64_t>(H) * W;
  if (idx >= planes * HW) return;
  const int64_t plane = idx / HW;
  const int i = static_cast<int>((idx % HW) / W), j = static_cast<int>(idx % W);
  const int Hd = H + 2 * R, Wd = W + 2 * R;
  const T* src = dxp + plane * static_cast<int64_t>(Hd) * Wd;
  T acc = T(0);
  for (int a = 0; a < 2 * R + 1; ++a) {
    // Candidate rows in ascending order: [0, R), i + R, [H + R, H + 2R).
    const int P = a < R ? a : (a == R ? i + R : H + a - 1);
    if (a != R && reflect_i(P - R, H) != i) continue;
    for (int b = 0; b < 2 * R + 1; ++b) {
      const int Q = b < R ? b : (b == R ? j + R : W + b - 1);
      if (b != R && reflect_i(Q - R, W) != j) continue;
      acc += src[static_cast<int64_t>(P) * Wd + Q];
    }
  }
  dx[idx] = acc;
}

// Coefficients: one thread per (c, m) filter: a (theta or |theta|) at the neighbours, -s at the centre,
// s summed in raster order (the "lightweight kernel for s").
template <typename T>
__global__ void full_kernels_kernel(const T* __restrict__ theta, T* __restrict__ kern, int64_t CM, int M, int n_free,
                                    int KK) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= CM) return;
  const bool anchored = static_cast<int>(idx % M) >= n_free;
  const T* th = theta + idx * (KK - 1);
  T* k = kern + idx * KK;
  const int c0 = KK / 2;
  T s = T(0);
  for (int i = 0; i < KK - 1; ++i) {
    const T a = anchored ? abs_t(th[i]) : th[i];
    s += a;
    k[i < c0 ? i : i + 1] = a;
  }
  k[c0] = -s;
}

// dtheta = (dk[neighbour] - dk[centre]) (free) times sign(theta) (anchored, sign(0) = 0).
template <typename T>
__global__ void theta_grad_kernel(const T* __restrict__ dkern, const T* __restrict__ theta, T* __restrict__ dtheta,
                                  int64_t CM, int M, int n_free, int KK) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= CM) return;
  const bool anchored = static_cast<int>(idx % M) >= n_free;
  const T* dk = dkern + idx * KK;
  const int c0 = KK / 2;
  for (int i = 0; i < KK - 1; ++i) {
    const T da = dk[i < c0 ? i : i + 1] - dk[c0];
    const T th = theta[idx * (KK - 1) + i];
    dtheta[idx * (KK - 1) + i] = anchored ? times_sign(da, th) : da;
  }
}

// ---- host side -----------------------------------------------------------------------------------------

template <typename T>
struct Workspace {
  T *gu, *part_k, *part_w, *part_b, *dxp;
  size_t bytes;
};

inline size_t align256(size_t b) { return (b + 255) / 256 * 256; }

template <typename T>
Workspace<T> carve(void* base, const ZeroSumShape& s, int64_t ntiles, bool need_dx) {
  const int64_t planes = s.B * s.C, R = s.K / 2, taps = s.M * s.K * s.K;
  size_t off = 0;
  auto take = [&](int64_t count) {
    T* p = base ? reinterpret_cast<T*>(static_cast<char*>(base) + off) : nullptr;
    off += align256(static_cast<size_t>(count) * sizeof(T));
    return p;
  };
  Workspace<T> w;
  w.gu = take(planes * s.M * s.H * s.W);
  w.part_k = take(planes * ntiles * taps);
  w.part_w = take(planes * ntiles * s.M);
  w.part_b = take(planes * ntiles);
  w.dxp = need_dx ? take(planes * (s.H + 2 * R) * (s.W + 2 * R)) : nullptr;
  w.bytes = off;
  return w;
}

void tile_for(const ZeroSumShape& s, int* tw, int* th) {
  if (s.K == 7) {
    *tw = 16, *th = 8;
  } else if (s.K <= 5 && s.H >= 64 && s.W >= 64) {
    *tw = 16, *th = 16;
  } else {
    *tw = 8, *th = 8;
  }
}

int64_t ntiles_for(const ZeroSumShape& s) {
  int tw, th;
  tile_for(s, &tw, &th);
  return ((s.W + tw - 1) / tw) * ((s.H + th - 1) / th);
}

// Launches fn(grid, plane0) over chunks of at most 65535 planes (grid z limit).
template <typename F>
void over_planes(int64_t planes, dim3 grid, F&& fn) {
  for (int64_t p0 = 0; p0 < planes; p0 += kMaxGridZ) {
    grid.z = static_cast<unsigned>(planes - p0 < kMaxGridZ ? planes - p0 : kMaxGridZ);
    fn(grid, p0);
  }
}

template <typename T, int K, int M, int TX, int TY>
int forward_tiled(const T* x, const T* kern, const T* weight, const T* bias, T* out, const ZeroSumShape& s,
                  cudaStream_t stream) {
  dim3 block(TX, TY);
  dim3 grid(static_cast<unsigned>((s.W + TX - 1) / TX), static_cast<unsigned>((s.H + TY - 1) / TY));
  over_planes(s.B * s.C, grid, [&](dim3 gr, int64_t p0) {
    forward_kernel<T, K, M, TX, TY><<<gr, block, 0, stream>>>(x, kern, weight, bias, out, static_cast<int>(s.C),
                                                              static_cast<int>(s.H), static_cast<int>(s.W), p0);
  });
  return static_cast<int>(cudaGetLastError());
}

template <typename T, int K, int M, int TX, int TY>
int backward_tiled(const T* x, const T* g, const T* kern, const T* weight, T* dx, T* dkern, T* dweight, T* dbias,
                   const ZeroSumShape& s, const Workspace<T>& ws, cudaStream_t stream) {
  constexpr int R = K / 2;
  const int C = static_cast<int>(s.C), H = static_cast<int>(s.H), W = static_cast<int>(s.W);
  const int64_t planes = s.B * s.C;
  dim3 block(TX, TY);
  dim3 grid(static_cast<unsigned>((W + TX - 1) / TX), static_cast<unsigned>((H + TY - 1) / TY));
  const int64_t ntiles = static_cast<int64_t>(grid.x) * grid.y;
  over_planes(planes, grid, [&](dim3 gr, int64_t p0) {
    grad_u_kernel<T, K, M, TX, TY><<<gr, block, 0, stream>>>(x, g, kern, weight, ws.gu, ws.part_k, ws.part_w,
                                                             ws.part_b, C, H, W, p0);
  });
  const int taps = static_cast<int>(s.M * s.K * s.K);
  const int64_t nred = s.C * taps + s.C * s.M + s.C;
  reduce_partials_kernel<T><<<static_cast<unsigned>((nred + 127) / 128), 128, 0, stream>>>(
      ws.part_k, ws.part_w, ws.part_b, dkern, dweight, dbias, static_cast<int>(s.B), C, static_cast<int>(s.M), taps,
      ntiles);
  if (dx) {
    dim3 gridd(static_cast<unsigned>((W + 2 * R + TX - 1) / TX), static_cast<unsigned>((H + 2 * R + TY - 1) / TY));
    over_planes(planes, gridd, [&](dim3 gr, int64_t p0) {
      input_grad_halo_kernel<T, K, M, TX, TY><<<gr, block, 0, stream>>>(ws.gu, kern, ws.dxp, C, H, W, p0);
    });
    const int64_t n = planes * s.H * s.W;
    fold_kernel<T><<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(ws.dxp, dx, planes, H, W, R);
  }
  return static_cast<int>(cudaGetLastError());
}

// Calls f.template run<K, M, TX, TY>() for the shape's K, M and tile.
template <typename F>
int dispatch(const ZeroSumShape& s, F&& f) {
  int tw, th;
  tile_for(s, &tw, &th);
#define DN_ZS_M(k, tx, ty)                                            \
  if (s.M == 1) return f.template run<k, 1, tx, ty>();                \
  if (s.M == 2) return f.template run<k, 2, tx, ty>();                \
  if (s.M == 4) return f.template run<k, 4, tx, ty>();                \
  return static_cast<int>(cudaErrorInvalidValue);
  if (s.K == 3 && tw == 16) { DN_ZS_M(3, 16, 16) }
  if (s.K == 3) { DN_ZS_M(3, 8, 8) }
  if (s.K == 5 && tw == 16) { DN_ZS_M(5, 16, 16) }
  if (s.K == 5) { DN_ZS_M(5, 8, 8) }
  if (s.K == 7) { DN_ZS_M(7, 16, 8) }
  if (s.K == 9) { DN_ZS_M(9, 8, 8) }
#undef DN_ZS_M
  return static_cast<int>(cudaErrorInvalidValue);
}

template <typename T>
struct ForwardCall {
  const T *x, *kern, *weight, *bias;
  T* out;
  const ZeroSumShape& s;
  cudaStream_t stream;
  template <int K, int M, int TX, int TY>
  int run() const {
    return forward_tiled<T, K, M, TX, TY>(x, kern, weight, bias, out, s, stream);
  }
};

template <typename T>
struct BackwardCall {
  const T *x, *g, *kern, *weight;
  T *dx, *dkern, *dweight, *dbias;
  const ZeroSumShape& s;
  const Workspace<T>& ws;
  cudaStream_t stream;
  template <int K, int M, int TX, int TY>
  int run() const {
    return backward_tiled<T, K, M, TX, TY>(x, g, kern, weight, dx, dkern, dweight, dbias, s, ws, stream);
  }
};

}  // namespace

bool zero_sum_cuda_supported(int64_t K, int64_t M) {
  return (K == 3 || K == 5 || K == 7 || K == 9) && (M == 1 || M == 2 || M == 4);
}

void zero_sum_cuda_tile(const ZeroSumShape& s, int* tile_w, int* tile_h) { tile_for(s, tile_w, tile_h); }

template <typename T>
int zero_sum_forward_cuda(const T* x, const T* kern, const T* weight, const T* bias, T* out, const ZeroSumShape& s,
                          void* stream) {
  if (!zero_sum_cuda_supported(s.K, s.M)) return static_cast<int>(cudaErrorInvalidValue);
  if (s.B * s.C * s.H * s.W == 0) return 0;
  return dispatch(s, ForwardCall<T>{x, kern, weight, bias, out, s, static_cast<cudaStream_t>(stream)});
}

template <typename T>
size_t zero_sum_backward_workspace_bytes(const ZeroSumShape& s, bool need_dx) {
  return carve<T>(nullptr, s, ntiles_for(s), need_dx).bytes;
}

template <typename T>
int zero_sum_backward_cuda(const T* x, const T* g, const T* kern, const T* weight, T* dx, T* dkern, T* dweight,
                           T* dbias, const ZeroSumShape& s, void* workspace, size_t workspace_bytes, void* stream) {
  if (!zero_sum_cuda_supported(s.K, s.M)) return static_cast<int>(cudaErrorInvalidValue);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (s.B * s.C * s.H * s.W == 0) {
    if (dkern) cudaMemsetAsync(dkern, 0, sizeof(T) * s.C * s.M * s.K * s.K, st);
    if (dweight) cudaMemsetAsync(dweight, 0, sizeof(T) * s.C * s.M, st);
    if (dbias) cudaMemsetAsync(dbias, 0, sizeof(T) * s.C, st);
    return static_cast<int>(cudaGetLastError());
  }
  Workspace<T> ws = carve<T>(workspace, s, ntiles_for(s), dx != nullptr);
  if (ws.bytes > workspace_bytes) return static_cast<int>(cudaErrorInvalidValue);
  return dispatch(s, BackwardCall<T>{x, g, kern, weight, dx, dkern, dweight, dbias, s, ws, st});
}

template <typename T>
int zero_sum_full_kernels_cuda(const T* theta, T* kern, int64_t C, int64_t M, int64_t n_free, int64_t K,
                               void* stream) {
  const int64_t CM = C * M;
  if (CM == 0) return 0;
  full_kernels_kernel<T><<<static_cast<unsigned>((CM + 127) / 128), 128, 0, static_cast<cudaStream_t>(stream)>>>(
      theta, kern, CM, static_cast<int>(M), static_cast<int>(n_free), static_cast<int>(K * K));
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int zero_sum_theta_grad_cuda(const T* dkern, const T* theta, T* dtheta, int64_t C, int64_t M, int64_t n_free,
                             int64_t K, void* stream) {
  const int64_t CM = C * M;
  if (CM == 0) return 0;
  theta_grad_kernel<T><<<static_cast<unsigned>((CM + 127) / 128), 128, 0, static_cast<cudaStream_t>(stream)>>>(
      dkern, theta, dtheta, CM, static_cast<int>(M), static_cast<int>(n_free), static_cast<int>(K * K));
  return static_cast<int>(cudaGetLastError());
}

const char* zero_sum_cuda_error_string(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

template int zero_sum_forward_cuda<float>(const float*, const float*, const float*, const float*, float*,
                                          const ZeroSumShape&, void*);
template int zero_sum_forward_cuda<double>(const double*, const double*, const double*, const double*, double*,
                                           const ZeroSumShape&, void*);
template size_t zero_sum_backward_workspace_bytes<float>(const ZeroSumShape&, bool);
template size_t zero_sum_backward_workspace_bytes<double>(const ZeroSumShape&, bool);
template int zero_sum_backward_cuda<float>(const float*, const float*, const float*, const float*, float*, float*,
                                           float*, float*, const ZeroSumShape&, void*, size_t, void*);
template int zero_sum_backward_cuda<double>(const double*, const double*, const double*, const double*, double*,
                                            double*, double*, double*, const ZeroSumShape&, void*, size_t, void*);

template int zero_sum_full_kernels_cuda<float>(const float*, float*, int64_t, int64_t, int64_t, int64_t, void*);
template int zero_sum_full_kernels_cuda<double>(const double*, double*, int64_t, int64_t, int64_t, int64_t, void*);
template int zero_sum_theta_grad_cuda<float>(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t,
                                             void*);
template int zero_sum_theta_grad_cuda<double>(const double*, const double*, double*, int64_t, int64_t, int64_t,
                                              int64_t, void*);

}  // namespace diffnet::ops::cuda
