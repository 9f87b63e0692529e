// CPU kernels of the fused zero-sum operator: one (b, c) plane per task, the plane reflected once into a
// padded buffer, then register-blocked SIMD loops over row blocks x vector chunks with K, M and the blocking as template parameters.
//
// Backward per plane: (1) recompute u, form gu_m = g * w_m * sign(u_m) into a zero-padded buffer and the
// dweight/dbias partials; (2) dkern partials = sum_p gu_m(p) x~(p + d); (3) the halo-extended input
// gradient dxp = correlation of gu with the flipped kernels; (4) fold dxp's halo onto its reflected
// interior sources (exact adjoint of the reflected access).
//
// This file is the wrapper: the kernels are in zero_sum_kernel.inc, compiled once per instruction-set
// level (ops/cpu_isa_foreach.h; GCC/Clang vector extensions, DN_VEC_BYTES wide).
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

#define DIFFNET_CPU_KERNEL_BODY "ops/zero_sum/cpu/zero_sum_kernel.inc"
#include "ops/cpu_isa_foreach.h"
