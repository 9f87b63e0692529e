// The standalone GELU's CPU passes (cpu/gelu_kernel.h): chunks of the storage in parallel, each a plain
// loop the compiler vectorises for each instruction-set level (ops/cpu_isa_foreach.h; the arithmetic of
// cpu/gelu_math.h has no libm call).
#include "ops/grn/cpu/gelu_kernel.h"

#include <ATen/Parallel.h>

#include "ops/grn/cpu/gelu_math.h"
#include "ops/grn/cpu/grn_kernel.h"

#define DIFFNET_CPU_KERNEL_BODY "ops/grn/cpu/gelu_kernel.inc"
#include "ops/cpu_isa_foreach.h"
