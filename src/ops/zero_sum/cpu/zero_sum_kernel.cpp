// CPU kernels of the fused zero-sum operator: one (b, c) plane per task, the plane reflected once into a
// padded buffer, then register-blocked SIMD loops (GCC/Clang vector extensions, width from the build's
// -march) over row blocks x vector chunks with K, M and the blocking as template parameters.
//
// Backward per plane: (1) recompute u, form gu_m = g * w_m * sign(u_m) into a zero-padded buffer and the
// dweight/dbias partials; (2) dkern partials = sum_p gu_m(p) x~(p + d); (3) the halo-extended input
// gradient dxp = correlation of gu with the flipped kernels; (4) fold dxp's halo onto its reflected
// interior sources (exact adjoint of the reflected access).
#include "ops/zero_sum/cpu/zero_sum_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__AVX512F__)
#define DN_ZS_VEC_BYTES 64
#define DN_ZS_VEC_REGS 32
#elif defined(__AVX__)
#define DN_ZS_VEC_BYTES 32
#define DN_ZS_VEC_REGS 16
#else
#define DN_ZS_VEC_BYTES 16
#define DN_ZS_VEC_REGS 16
#endif

namespace diffnet::ops::cpu {
namespace {

// ---- SIMD helpers ------------------------------------------------------------------------------------
template <typename T>
struct Simd;
template <>
struct Simd<float> {
  typedef float V __attribute__((vector_size(DN_ZS_VEC_BYTES)));
  typedef int32_t I __attribute__((vector_size(DN_ZS_VEC_BYTES)));
  static constexpr int N = DN_ZS_VEC_BYTES / 4;
  static constexpr int32_t kAbsMask = 0x7fffffff;
};
template <>
struct Simd<double> {
  typedef double V __attribute__((vector_size(DN_ZS_VEC_BYTES)));
  typedef int64_t I __attribute__((vector_size(DN_ZS_VEC_BYTES)));
  static constexpr int N = DN_ZS_VEC_BYTES / 8;
  static constexpr int64_t kAbsMask = 0x7fffffffffffffffLL;
};

template <typename V, typename T>
inline V loadu(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <typename T, typename V>
inline void storeu(T* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}
template <typename T>
inline typename Simd<T>::V vabs(typename Simd<T>::V v) {
  using S = Simd<T>;
  typename S::I mask = typename S::I{} + S::kAbsMask;
  return (typename S::V)((typename S::I)v & mask);
}
// gw * sign(u) with sign(0) = 0.
template <typename T>
inline typename Simd<T>::V times_sign(typename Simd<T>::V gw, typename Simd<T>::V u) {
  using S = Simd<T>;
  typename S::V zero{};
  typename S::I pos = u > zero, neg = u < zero;
  return (typename S::V)(((typename S::I)gw & pos) | ((typename S::I)(-gw) & neg));
}
template <typename T>
inline double hsum(typename Simd<T>::V v) {
  double s = 0;
  for (int i = 0; i < Simd<T>::N; ++i) s += static_cast<double>(v[i]);
  return s;
}

constexpr int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// 64-byte aligned scratch buffer.
template <typename T>
struct Buffer {
  T* ptr = nullptr;
  size_t n = 0;
  void resize_zero(size_t count) {
    if (count > n) {
      std::free(ptr);
      size_t bytes = round_up(static_cast<int64_t>(count * sizeof(T)), 64);
      ptr = static_cast<T*>(std::aligned_alloc(64, bytes));
      if (!ptr) throw std::bad_alloc();
      n = count;
    }
    std::memset(ptr, 0, count * sizeof(T));
  }
  ~Buffer() { std::free(ptr); }
};

// Iterated reflection (same as reflect_index in zero_sum_dense.cpp; kept local so the kernels have no
// dependency on the LibTorch-facing code).
inline int64_t reflect(int64_t i, int64_t n) {
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  int64_t m = i % period;
  if (m < 0) m += period;
  return m < n ? m : period - m;
}

// ---- per-plane kernels ---------------------------------------------------------------------------------
template <typename T, int K, int M>
struct PlaneKernels {
  using S = Simd<T>;
  using V = typename S::V;
  static constexpr int N = S::N;
  static constexpr int R = K / 2;
  static constexpr int KK = K * K;
  static constexpr int kAccBudget = DN_ZS_VEC_REGS == 32 ? 24 : 12;
  // Output rows per register block (forward and recompute): RB * M accumulators.
  static constexpr int RB = std::max(1, std::min(8, kAccBudget / M));
  // Rows per block of the input-gradient correlation (one accumulator per row).
  static constexpr int RBX = 8;
  // dx offsets per pass of the kernel-gradient reduction: M * G accumulators.
  static constexpr int G = std::max(1, std::min(K, kAccBudget / M));

  // Geometry of the scratch buffers for an H x W plane.
  struct Geometry {
    int64_t H, W;
    int64_t ld, rows_xp;         // reflected input xp: (rows_xp, ld), x~(y, x) at xp[(y+R)*ld + x+R]
    int64_t ldz, rows_z;         // gu buffers gz_m: (rows_z, ldz), gu(y, x) at gz[(y+2R)*ldz + x+2R]
    int64_t ldd, rows_d;         // halo-extended input gradient dxp: (rows_d, ldd)
    int64_t ldg, rows_g;         // staged upstream gradient: (rows_g, ldg), zero-padded
    Geometry(int64_t h, int64_t w) : H(h), W(w) {
      ld = round_up(round_up(W, N) + 2 * R, N);
      rows_xp = round_up(H, RB) + 2 * R;
      ldd = round_up(W + 2 * R, N);
      rows_d = round_up(H + 2 * R, RBX);
      ldz = round_up(ldd + 2 * R, N);
      rows_z = std::max(rows_d, round_up(H, RB)) + 2 * R;
      ldg = round_up(W, N);
      rows_g = round_up(H, RB);
    }
  };

  // Reflected copy of one plane (x~ on [-R, H+R) x [-R, W+R)) from a strided source (row stride sh,
  // column stride sw); columns past W+2R stay zero.
  __attribute__((noinline)) static void reflect_plane(const T* src, int64_t sh, int64_t sw, T* xp, const Geometry& g,
                                                      const int64_t* colsrc) {
    const int64_t H = g.H, W = g.W;
    for (int64_t Y = 0; Y < H + 2 * R; ++Y) {
      const T* s = src + reflect(Y - R, H) * sh;
      T* d = xp + Y * g.ld;
      for (int64_t X = 0; X < R; ++X) d[X] = s[colsrc[X] * sw];
      if (sw == 1) {
        std::memcpy(d + R, s, sizeof(T) * W);
      } else {
        for (int64_t j = 0; j < W; ++j) d[R + j] = s[j * sw];
      }
      for (int64_t X = W + R; X < W + 2 * R; ++X) d[X] = s[colsrc[X] * sw];
    }
  }

  // Correlation of rows y0+j with filter m at columns [x, x+N) into RB*M register accumulators, then
  // epi(acc). Not inlined into the row/column loops: there the compiler hoisted the coefficient
  // broadcasts and spilled the accumulators; one block per call keeps them in registers, and the epilogue
  // consumes them directly (no store/reload of the accumulators).
  template <class Epi>
  __attribute__((noinline)) static void corr_block(const T* xp, int64_t ld, const T* kern, int64_t y0, int64_t x,
                                                    const Epi& epi) {
    V acc[RB][M];
#pragma GCC unroll 8
    for (int j = 0; j < RB; ++j)
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) acc[j][m] = V{};
    const T* base = xp + y0 * ld + x;
#pragma GCC unroll 16
    for (int ir = 0; ir < RB + K - 1; ++ir) {
      const T* row = base + ir * ld;
#pragma GCC unroll 9
      for (int dx = 0; dx < K; ++dx) {
        const V xv = loadu<V>(row + dx);
#pragma GCC unroll 8
        for (int j = 0; j < RB; ++j) {
          const int dy = ir - j;
          if (dy < 0 || dy >= K) continue;
#pragma GCC unroll 4
          for (int m = 0; m < M; ++m) acc[j][m] += kern[m * KK + dy * K + dx] * xv;
        }
      }
    }
    epi(acc);
  }

  // Output plane with row stride oh and column stride ow.
  __attribute__((noinline)) static void forward(const T* xp, const Geometry& g, const T* kern, const T* w, T bias,
                                                T* out, int64_t oh, int64_t ow) {
    const int64_t H = g.H, W = g.W;
    for (int64_t y0 = 0; y0 < H; y0 += RB) {
      for (int64_t x = 0; x < W; x += N) {
        corr_block(xp, g.ld, kern, y0, x, [&](const V (&acc)[RB][M]) {
#pragma GCC unroll 8
          for (int j = 0; j < RB; ++j) {
            if (y0 + j >= H) break;
            V o = V{} + bias;
#pragma GCC unroll 4
            for (int m = 0; m < M; ++m) o += w[m] * vabs<T>(acc[j][m]);
            T* dst = out + (y0 + j) * oh + x * ow;
            if (ow == 1 && x + N <= W) {
              storeu(dst, o);
            } else {
              alignas(64) T tmp[N];
              storeu(tmp, o);
              const int64_t n = std::min<int64_t>(N, W - x);
              for (int64_t i = 0; i < n; ++i) dst[i * ow] = tmp[i];
            }
          }
        });
      }
    }
  }

  // Zero-padded copy of the upstream gradient plane: (rows_g, ldg), zero past H rows and W columns.
  static void stage_grad(const T* g, int64_t gh, int64_t gw, const Geometry& geo, T* gp) {
    for (int64_t y = 0; y < geo.H; ++y) {
      if (gw == 1) {
        std::memcpy(gp + y * geo.ldg, g + y * gh, sizeof(T) * geo.W);
      } else {
        for (int64_t j = 0; j < geo.W; ++j) gp[y * geo.ldg + j] = g[y * gh + j * gw];
      }
    }
  }

  // Step 1 of backward: gz_m = g * w_m * sign(u_m) (zero outside the plane), dw_m = sum g |u_m|,
  // db = sum g. gp: the staged gradient (stage_grad); rows past H give g = 0, so gz stays zero there.
  __attribute__((noinline)) static void recompute(const T* xp, const Geometry& geo, const T* kern, const T* w,
                                                  const T* gp, T* gz, double* dw, double* db) {
    const int64_t H = geo.H, W = geo.W, zplane = geo.rows_z * geo.ldz;
    V dwacc[M];
    for (int m = 0; m < M; ++m) dwacc[m] = V{};
    V dbacc{};
    for (int64_t y0 = 0; y0 < H; y0 += RB) {
      for (int64_t x = 0; x < W; x += N) {
        corr_block(xp, geo.ld, kern, y0, x, [&](const V (&acc)[RB][M]) {
#pragma GCC unroll 8
          for (int j = 0; j < RB; ++j) {
            const V gv = loadu<V>(gp + (y0 + j) * geo.ldg + x);
            dbacc += gv;
            T* zrow = gz + (y0 + j + 2 * R) * geo.ldz + x + 2 * R;
#pragma GCC unroll 4
            for (int m = 0; m < M; ++m) {
              dwacc[m] += gv * vabs<T>(acc[j][m]);
              storeu(zrow + m * zplane, times_sign<T>(gv * w[m], acc[j][m]));
            }
          }
        });
      }
    }
    for (int m = 0; m < M; ++m) dw[m] = hsum<T>(dwacc[m]);
    *db = hsum<T>(dbacc);
  }

  // Step 2: dk[m][dy*K+dx] = sum_p gu_m(p) x~(p + (dy-R, dx-R)).
  __attribute__((noinline)) static void kernel_grad(const T* xp, const Geometry& geo, const T* gz, double* dk) {
    const int64_t H = geo.H, W = geo.W, zplane = geo.rows_z * geo.ldz;
    constexpr int64_t kFlushRows = 16;  // float accumulators are flushed into double every few rows
    for (int dy = 0; dy < K; ++dy) {
      for (int d0 = 0; d0 < K; d0 += G) {
        double total[M][G] = {};
        for (int64_t yb = 0; yb < H; yb += kFlushRows) {
          V acc[M][G];
#pragma GCC unroll 4
          for (int m = 0; m < M; ++m)
#pragma GCC unroll 9
            for (int d = 0; d < G; ++d) acc[m][d] = V{};
          const int64_t ye = std::min(H, yb + kFlushRows);
          for (int64_t y = yb; y < ye; ++y) {
            const T* zrow = gz + (y + 2 * R) * geo.ldz + 2 * R;
            const T* xrow = xp + (y + dy) * geo.ld + d0;
            for (int64_t x = 0; x < W; x += N) {
              V gm[M];
#pragma GCC unroll 4
              for (int m = 0; m < M; ++m) gm[m] = loadu<V>(zrow + m * zplane + x);
#pragma GCC unroll 9
              for (int d = 0; d < G; ++d) {
                if (d0 + d >= K) break;
                const V xv = loadu<V>(xrow + x + d);
#pragma GCC unroll 4
                for (int m = 0; m < M; ++m) acc[m][d] += gm[m] * xv;
              }
            }
          }
          for (int m = 0; m < M; ++m)
            for (int d = 0; d < G && d0 + d < K; ++d) total[m][d] += hsum<T>(acc[m][d]);
        }
        for (int m = 0; m < M; ++m)
          for (int d = 0; d < G && d0 + d < K; ++d) dk[m * KK + dy * K + d0 + d] = total[m][d];
      }
    }
  }

  // Step 3: dxp(P, Q) = sum_m sum_t kf_m(t) gz_m(P + t), P in [0, H+2R) x [0, W+2R), kf the flipped
  // kernels. dxp(P, Q) is the gradient of x~ at (P-R, Q-R).
  __attribute__((noinline)) static void input_grad_halo(const T* gz, const Geometry& geo, const T* kf, T* dxp) {
    const int64_t Hd = geo.H + 2 * R, Wd = geo.W + 2 * R, zplane = geo.rows_z * geo.ldz;
    for (int64_t p0 = 0; p0 < Hd; p0 += RBX) {
      for (int64_t q = 0; q < Wd; q += N) {
        V acc[RBX];
#pragma GCC unroll 8
        for (int j = 0; j < RBX; ++j) acc[j] = V{};
        const T* base = gz + p0 * geo.ldz + q;
#pragma GCC unroll 16
        for (int ir = 0; ir < RBX + K - 1; ++ir) {
#pragma GCC unroll 9
          for (int tx = 0; tx < K; ++tx) {
#pragma GCC unroll 4
            for (int m = 0; m < M; ++m) {
              const V gv = loadu<V>(base + m * zplane + ir * geo.ldz + tx);
#pragma GCC unroll 8
              for (int j = 0; j < RBX; ++j) {
                const int t = ir - j;
                if (t < 0 || t >= K) continue;
                acc[j] += kf[m * KK + t * K + tx] * gv;
              }
            }
          }
        }
#pragma GCC unroll 8
        for (int j = 0; j < RBX; ++j) storeu(dxp + (p0 + j) * geo.ldd + q, acc[j]);
      }
    }
  }

  // Step 4: fold the halo of dxp onto the reflected interior sources, write the plane's dx.
  __attribute__((noinline)) static void fold(T* dxp, const Geometry& geo, const int64_t* colsrc, T* dx, int64_t dh,
                                             int64_t dw) {
    const int64_t H = geo.H, W = geo.W, ldd = geo.ldd;
    for (int64_t P = 0; P < H + 2 * R; ++P) {
      T* row = dxp + P * ldd;
      for (int64_t Q = 0; Q < R; ++Q) row[R + colsrc[Q]] += row[Q];
      for (int64_t Q = W + R; Q < W + 2 * R; ++Q) row[R + colsrc[Q]] += row[Q];
    }
    auto fold_row = [&](int64_t P) {
      const T* s = dxp + P * ldd + R;
      T* d = dxp + (R + reflect(P - R, H)) * ldd + R;
      for (int64_t j = 0; j < W; ++j) d[j] += s[j];
    };
    for (int64_t P = 0; P < R; ++P) fold_row(P);
    for (int64_t P = H + R; P < H + 2 * R; ++P) fold_row(P);
    for (int64_t i = 0; i < H; ++i) {
      const T* s = dxp + (i + R) * ldd + R;
      if (dw == 1) {
        std::memcpy(dx + i * dh, s, sizeof(T) * W);
      } else {
        for (int64_t j = 0; j < W; ++j) dx[i * dh + j * dw] = s[j];
      }
    }
  }

  static std::vector<int64_t> column_sources(int64_t W) {
    std::vector<int64_t> c(W + 2 * R);
    for (int64_t X = 0; X < W + 2 * R; ++X) c[X] = reflect(X - R, W);
    return c;
  }

  static void run_forward(const T* x, const Strides& xs, const T* kern, const T* weight, const T* bias, T* out,
                          const Strides& os, const ZeroSumShape& s) {
    at::parallel_for(0, s.B * s.C, 1, [&](int64_t begin, int64_t end) {
      Geometry geo(s.H, s.W);
      const std::vector<int64_t> colsrc = column_sources(s.W);
      Buffer<T> xp;
      xp.resize_zero(geo.rows_xp * geo.ld);
      for (int64_t p = begin; p < end; ++p) {
        const int64_t b = p / s.C, c = p % s.C;
        reflect_plane(x + b * xs.b + c * xs.c, xs.h, xs.w, xp.ptr, geo, colsrc.data());
        forward(xp.ptr, geo, kern + c * M * KK, weight + c * M, bias[c], out + b * os.b + c * os.c, os.h, os.w);
      }
    });
  }

  static void run_backward(const T* x, const Strides& xs, const T* gout, const Strides& gs, const T* kern,
                           const T* weight, T* dx, const Strides& dxs, double* dk_part, double* dw_part,
                           double* db_part, const ZeroSumShape& s) {
    // Flipped kernels for the input gradient, per channel.
    std::vector<T> kflip(s.C * M * KK);
    for (int64_t i = 0; i < s.C * M; ++i)
      for (int t = 0; t < KK; ++t) kflip[i * KK + t] = kern[i * KK + (KK - 1 - t)];
    at::parallel_for(0, s.B * s.C, 1, [&](int64_t begin, int64_t end) {
      Geometry geo(s.H, s.W);
      const std::vector<int64_t> colsrc = column_sources(s.W);
      Buffer<T> xp, gz, dxp, gp;
      xp.resize_zero(geo.rows_xp * geo.ld);
      gp.resize_zero(geo.rows_g * geo.ldg);
      gz.resize_zero(M * geo.rows_z * geo.ldz);
      if (dx) dxp.resize_zero(geo.rows_d * geo.ldd);
      for (int64_t p = begin; p < end; ++p) {
        const int64_t b = p / s.C, c = p % s.C;
        reflect_plane(x + b * xs.b + c * xs.c, xs.h, xs.w, xp.ptr, geo, colsrc.data());
        stage_grad(gout + b * gs.b + c * gs.c, gs.h, gs.w, geo, gp.ptr);
        recompute(xp.ptr, geo, kern + c * M * KK, weight + c * M, gp.ptr, gz.ptr, dw_part + p * M, db_part + p);
        kernel_grad(xp.ptr, geo, gz.ptr, dk_part + p * M * KK);
        if (dx) {
          input_grad_halo(gz.ptr, geo, kflip.data() + c * M * KK, dxp.ptr);
          fold(dxp.ptr, geo, colsrc.data(), dx + b * dxs.b + c * dxs.c, dxs.h, dxs.w);
        }
      }
    });
  }
};

// ---- channel-innermost forward (inference on channels_last activations) ------------------------------
// One task per output row (b, y); along the row, blocks of XB pixels x one SIMD vector of channels with
// M * XB accumulators: per tap, M kernel vectors (kt: (K*K, M, C), channels innermost) and XB input
// vectors feed M * XB FMAs. The reflection is two index tables (rows, columns), so no padded copy exists;
// the column table runs XB entries past the edge (valid pixels whose results are not stored).
template <typename T, int K, int M>
struct NhwcForward {
  using S = Simd<T>;
  using V = typename S::V;
  static constexpr int N = S::N;
  static constexpr int R = K / 2;
  static constexpr int XB = std::max(1, (DN_ZS_VEC_REGS / 2) / M);

  static void run(const T* x, const T* kern, const T* weight, const T* bias, T* out, const ZeroSumShape& s) {
    const int64_t B = s.B, C = s.C, H = s.H, W = s.W, KK = K * K;
    std::vector<T> kt(static_cast<size_t>(KK * M * C)), pw(static_cast<size_t>(M * C));
    for (int64_t c = 0; c < C; ++c)
      for (int m = 0; m < M; ++m) {
        for (int64_t d = 0; d < KK; ++d) kt[(d * M + m) * C + c] = kern[(c * M + m) * KK + d];
        pw[m * C + c] = weight[c * M + m];
      }
    std::vector<int64_t> ry(static_cast<size_t>(H + 2 * R)), rx(static_cast<size_t>(W + 2 * R + XB));
    for (int64_t i = 0; i < H + 2 * R; ++i) ry[i] = reflect(i - R, H) * W * C;
    for (int64_t i = 0; i < W + 2 * R + XB; ++i) rx[i] = reflect(std::min(i, W + 2 * R - 1) - R, W) * C;
    at::parallel_for(0, B * H, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t row = lo; row < hi; ++row) {
        const int64_t b = row / H, y = row % H;
        const T* xb = x + b * H * W * C;
        T* orow = out + row * W * C;
        for (int64_t x0 = 0; x0 < W; x0 += XB) {
          const int64_t nb = std::min<int64_t>(XB, W - x0);
          for (int64_t c = 0; c < C; c += N) {
            V acc[M][XB];
            for (int m = 0; m < M; ++m)
              for (int j = 0; j < XB; ++j) acc[m][j] = V{};
            for (int ky = 0; ky < K; ++ky) {
              const T* xr = xb + ry[y + ky] + c;
              const int64_t* cols = rx.data() + x0;
              const T* kr = kt.data() + ky * K * M * C + c;
              for (int kx = 0; kx < K; ++kx) {
                V w[M];
                for (int m = 0; m < M; ++m) w[m] = loadu<V>(kr + (kx * M + m) * C);
                for (int j = 0; j < XB; ++j) {
                  const V v = loadu<V>(xr + cols[j + kx]);
                  for (int m = 0; m < M; ++m) acc[m][j] += w[m] * v;
                }
              }
            }
            const V bv = loadu<V>(bias + c);
            V pv[M];
            for (int m = 0; m < M; ++m) pv[m] = loadu<V>(pw.data() + m * C + c);
            for (int64_t j = 0; j < nb; ++j) {
              V o = bv;
              for (int m = 0; m < M; ++m) o += pv[m] * vabs<T>(acc[m][j]);
              storeu(orow + (x0 + j) * C + c, o);
            }
          }
        }
      }
    });
  }
};

// f(Kernels<T, K, M>{}) for the instantiated K and M (PlaneKernels, NhwcForward).
template <typename T, template <typename, int, int> class Kernels = PlaneKernels, typename F>
void dispatch(int64_t K, int64_t M, F&& f) {
#define DN_ZS_CASE(k, m) \
  if (K == k && M == m) return f(Kernels<T, k, m>{});
  DN_ZS_CASE(3, 1) DN_ZS_CASE(3, 2) DN_ZS_CASE(3, 4)
  DN_ZS_CASE(5, 1) DN_ZS_CASE(5, 2) DN_ZS_CASE(5, 4)
  DN_ZS_CASE(7, 1) DN_ZS_CASE(7, 2) DN_ZS_CASE(7, 4)
  DN_ZS_CASE(9, 1) DN_ZS_CASE(9, 2) DN_ZS_CASE(9, 4)
#undef DN_ZS_CASE
  throw std::invalid_argument("zero_sum cpu kernel: unsupported K=" + std::to_string(K) +
                              " M=" + std::to_string(M));
}

}  // namespace

bool zero_sum_cpu_supported(int64_t K, int64_t M) {
  return (K == 3 || K == 5 || K == 7 || K == 9) && (M == 1 || M == 2 || M == 4);
}

template <typename T>
void zero_sum_forward_cpu(const T* x, const Strides& xs, const T* kern, const T* weight, const T* bias, T* out,
                          const Strides& os, const ZeroSumShape& s) {
  if (s.B * s.C * s.H * s.W == 0) return;
  dispatch<T>(s.K, s.M, [&](auto k) { decltype(k)::run_forward(x, xs, kern, weight, bias, out, os, s); });
}

template <typename T>
int64_t zero_sum_nhwc_lanes() {
  return Simd<T>::N;
}

template <typename T>
void zero_sum_forward_nhwc(const T* x, const T* kern, const T* weight, const T* bias, T* out, const ZeroSumShape& s) {
  if (s.B * s.C * s.H * s.W == 0) return;
  if (s.C % Simd<T>::N != 0) throw std::invalid_argument("zero_sum nhwc kernel: C must be a multiple of the lanes");
  dispatch<T, NhwcForward>(s.K, s.M, [&](auto k) { decltype(k)::run(x, kern, weight, bias, out, s); });
}

template <typename T>
void zero_sum_backward_cpu(const T* x, const Strides& xs, const T* g, const Strides& gs, const T* kern,
                           const T* weight, T* dx, const Strides& dxs, T* dkern, T* dweight, T* dbias,
                           const ZeroSumShape& s) {
  const int64_t P = s.B * s.C, KK = s.K * s.K;
  if (P * s.H * s.W == 0) {
    if (dkern) std::fill(dkern, dkern + s.C * s.M * KK, T(0));
    if (dweight) std::fill(dweight, dweight + s.C * s.M, T(0));
    if (dbias) std::fill(dbias, dbias + s.C, T(0));
    return;
  }
  // Phase 1: one partial per (b, c) plane.
  std::vector<double> dk_part(P * s.M * KK), dw_part(P * s.M), db_part(P);
  dispatch<T>(s.K, s.M, [&](auto k) {
    decltype(k)::run_backward(x, xs, g, gs, kern, weight, dx, dxs, dk_part.data(), dw_part.data(), db_part.data(),
                              s);
  });
  // Phase 2: fixed-order sums over the batch.
  for (int64_t c = 0; c < s.C; ++c) {
    for (int64_t i = 0; i < s.M * KK; ++i) {
      double acc = 0;
      for (int64_t b = 0; b < s.B; ++b) acc += dk_part[(b * s.C + c) * s.M * KK + i];
      if (dkern) dkern[c * s.M * KK + i] = static_cast<T>(acc);
    }
    for (int64_t m = 0; m < s.M; ++m) {
      double acc = 0;
      for (int64_t b = 0; b < s.B; ++b) acc += dw_part[(b * s.C + c) * s.M + m];
      if (dweight) dweight[c * s.M + m] = static_cast<T>(acc);
    }
    double acc = 0;
    for (int64_t b = 0; b < s.B; ++b) acc += db_part[b * s.C + c];
    if (dbias) dbias[c] = static_cast<T>(acc);
  }
}

// Visits the (B, C, H, W) planes in tiles of up to kLayoutTile pixels x kLayoutTile channels along rows,
// rows in parallel: tile(b, y, x0, nx, c0, nc). Both layout conversions below use it, so each tile reads
// and writes whole cache lines on both sides.
constexpr int64_t kLayoutTile = 16;
template <typename Tile>
void for_each_layout_tile(const ZeroSumShape& s, const Tile& tile) {
  at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / s.H, y = r % s.H;
      for (int64_t x0 = 0; x0 < s.W; x0 += kLayoutTile)
        for (int64_t c0 = 0; c0 < s.C; c0 += kLayoutTile)
          tile(b, y, x0, std::min(kLayoutTile, s.W - x0), c0, std::min(kLayoutTile, s.C - c0));
    }
  });
}

template <typename T>
void channels_last_to_planes(const T* src, const Strides& ss, T* dst, const ZeroSumShape& s) {
  // dst (B, C, H, W) contiguous: a tile reads nx runs of nc channels and writes nc runs of nx pixels.
  const int64_t HW = s.H * s.W;
  for_each_layout_tile(s, [&](int64_t b, int64_t y, int64_t x0, int64_t nx, int64_t c0, int64_t nc) {
    T t[kLayoutTile][kLayoutTile];
    for (int64_t i = 0; i < nx; ++i) {
      const T* p = src + b * ss.b + y * ss.h + (x0 + i) * ss.w + c0 * ss.c;
      for (int64_t c = 0; c < nc; ++c) t[c][i] = p[c * ss.c];
    }
    for (int64_t c = 0; c < nc; ++c)
      std::memcpy(dst + (b * s.C + c0 + c) * HW + y * s.W + x0, t[c], sizeof(T) * nx);
  });
}

template <typename T>
void planes_to_channels_last(const T* src, T* dst, const Strides& ds, const ZeroSumShape& s) {
  // src (B, C, H, W) contiguous; the inverse of channels_last_to_planes.
  const int64_t HW = s.H * s.W;
  for_each_layout_tile(s, [&](int64_t b, int64_t y, int64_t x0, int64_t nx, int64_t c0, int64_t nc) {
    T t[kLayoutTile][kLayoutTile];
    for (int64_t c = 0; c < nc; ++c)
      std::memcpy(t[c], src + (b * s.C + c0 + c) * HW + y * s.W + x0, sizeof(T) * nx);
    for (int64_t i = 0; i < nx; ++i) {
      T* p = dst + b * ds.b + y * ds.h + (x0 + i) * ds.w + c0 * ds.c;
      for (int64_t c = 0; c < nc; ++c) p[c * ds.c] = t[c][i];
    }
  });
}

template void zero_sum_forward_cpu<float>(const float*, const Strides&, const float*, const float*, const float*,
                                          float*, const Strides&, const ZeroSumShape&);
template void zero_sum_forward_cpu<double>(const double*, const Strides&, const double*, const double*,
                                           const double*, double*, const Strides&, const ZeroSumShape&);
template void zero_sum_backward_cpu<float>(const float*, const Strides&, const float*, const Strides&, const float*,
                                           const float*, float*, const Strides&, float*, float*, float*,
                                           const ZeroSumShape&);
template void zero_sum_backward_cpu<double>(const double*, const Strides&, const double*, const Strides&,
                                            const double*, const double*, double*, const Strides&, double*, double*,
                                            double*, const ZeroSumShape&);

template int64_t zero_sum_nhwc_lanes<float>();
template int64_t zero_sum_nhwc_lanes<double>();
template void zero_sum_forward_nhwc<float>(const float*, const float*, const float*, const float*, float*,
                                           const ZeroSumShape&);
template void zero_sum_forward_nhwc<double>(const double*, const double*, const double*, const double*, double*,
                                            const ZeroSumShape&);

template void channels_last_to_planes<float>(const float*, const Strides&, float*, const ZeroSumShape&);
template void channels_last_to_planes<double>(const double*, const Strides&, double*, const ZeroSumShape&);
template void planes_to_channels_last<float>(const float*, float*, const Strides&, const ZeroSumShape&);
template void planes_to_channels_last<double>(const double*, double*, const Strides&, const ZeroSumShape&);

}  // namespace diffnet::ops::cpu
