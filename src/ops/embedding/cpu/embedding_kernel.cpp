#include "ops/embedding/cpu/embedding_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

namespace diffnet::ops::cpu {

template <typename T>
void embedding_grad(const T* grad, const int64_t* idx, int64_t N, int64_t D, int64_t V, T* out) {
  const int64_t VD = V * D;
  // At most 64 blocks (bounded partial memory), at least 8,192 lookups each (enough work per task). The
  // block boundaries depend on N only, so the sums do not depend on the thread count.
  const int64_t block = std::max<int64_t>(8192, (N + 63) / 64);
  const int64_t nblocks = std::max<int64_t>(1, (N + block - 1) / block);
  std::vector<double> partial(size_t(nblocks * VD), 0.0);
  at::parallel_for(0, nblocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      double* acc = partial.data() + b * VD;
      const int64_t i1 = std::min(N, (b + 1) * block);
      for (int64_t i = b * block; i < i1; ++i) {
        double* row = acc + idx[i] * D;
        const T* g = grad + i * D;
        for (int64_t j = 0; j < D; ++j) row[j] += double(g[j]);
      }
    }
  });
  for (int64_t k = 0; k < VD; ++k) {
    double s = 0;
    for (int64_t b = 0; b < nblocks; ++b) s += partial[size_t(b * VD + k)];
    out[k] = T(s);
  }
}

template void embedding_grad<float>(const float*, const int64_t*, int64_t, int64_t, int64_t, float*);
template void embedding_grad<double>(const double*, const int64_t*, int64_t, int64_t, int64_t, double*);

}  // namespace diffnet::ops::cpu
