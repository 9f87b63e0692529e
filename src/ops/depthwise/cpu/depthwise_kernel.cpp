// The depthwise convolution's weight gradient on NHWC (cpu/depthwise_kernel.h). It walks the channels in
// chunks of V held in registers (the compiler vectorises the fixed-length inner loops for each
// instruction-set level: ops/cpu_isa_foreach.h), one accumulator per tap of a kernel row (K independent
// chains), with K a template parameter so the tap loops unroll; columns whose taps reach past the border
// take the checked path.
#include "ops/depthwise/cpu/depthwise_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "diffnet/common.h"

#define DIFFNET_CPU_KERNEL_BODY "ops/depthwise/cpu/depthwise_kernel.inc"
#include "ops/cpu_isa_foreach.h"
