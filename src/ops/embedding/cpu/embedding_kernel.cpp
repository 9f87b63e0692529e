// The embedding backward's CPU pass (cpu/embedding_kernel.h): partial sums over fixed blocks of lookups,
// compiled once per instruction-set level (ops/cpu_isa_foreach.h).
#include "ops/embedding/cpu/embedding_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#define DIFFNET_CPU_KERNEL_BODY "ops/embedding/cpu/embedding_kernel.inc"
#include "ops/cpu_isa_foreach.h"
