// The fused GRN's CPU passes, and those of GELU + GRN (cpu/grn_kernel.h). All walk the positions in
// parallel and the channels innermost (contiguous, vectorised by the compiler for each instruction-set
// level: ops/cpu_isa_foreach.h); the sums keep one float or double accumulator row per block of
// positions, so no atomic or thread-count-dependent order is involved.
#include "ops/grn/cpu/grn_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "ops/grn/cpu/gelu_math.h"

#define DIFFNET_CPU_KERNEL_BODY "ops/grn/cpu/grn_kernel.inc"
#include "ops/cpu_isa_foreach.h"
