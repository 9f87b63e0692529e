// The vector instruction set our own CPU kernels (src/ops/*/cpu/) run with. Each kernel file is compiled
// once per level: base (the build's own flags: plain x86-64 unless DIFFNET_NATIVE), avx2 (AVX2 + FMA) and
// avx512 (AVX-512 F/BW/DQ/VL); calls go to the highest level this CPU has, or to the one $DIFFNET_CPU_ISA
// names (base | avx2 | avx512 | auto). So one binary runs on any x86-64 CPU at its best width (docs/ops.md,
// "One binary for every CPU"). GCC on x86-64 only: elsewhere (clang, other architectures) base alone.
#pragma once

#include <string>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define DIFFNET_CPU_MULTI_ISA 1
#else
#define DIFFNET_CPU_MULTI_ISA 0
#endif

namespace diffnet {

enum class CpuIsa { kBase = 0, kAvx2 = 1, kAvx512 = 2 };

// The highest level both this CPU (CPUID, with the operating system's support for the wider registers)
// and this build have.
CpuIsa cpu_isa_supported();
// The level kernel calls use: $DIFFNET_CPU_ISA when set (an Error above cpu_isa_supported() or for an
// unknown name), else cpu_isa_supported(); decided at the first call.
CpuIsa cpu_isa();
// Sets the level for the rest of the process (tests); an Error above cpu_isa_supported().
void set_cpu_isa(CpuIsa isa);
const char* cpu_isa_name(CpuIsa isa);
// "base" | "avx2" | "avx512" -> the level; an Error naming `what` otherwise.
CpuIsa parse_cpu_isa(const std::string& name, const char* what);

}  // namespace diffnet

// Inside a kernel header's dispatching function: `DIFFNET_CPU_DISPATCH(f<T>(a, b));` returns
// <level>::f<T>(a, b) for the level of cpu_isa(), the namespaces being those of src/ops/cpu_isa_foreach.h.
#if DIFFNET_CPU_MULTI_ISA
#define DIFFNET_CPU_DISPATCH(...)                                         \
  switch (::diffnet::cpu_isa()) {                                         \
    case ::diffnet::CpuIsa::kAvx512: return avx512::__VA_ARGS__;          \
    case ::diffnet::CpuIsa::kAvx2: return avx2::__VA_ARGS__;              \
    default: return base::__VA_ARGS__;                                    \
  }
#define DIFFNET_CPU_FOR_EACH_ISA(DECLS) \
  namespace base { DECLS }              \
  namespace avx2 { DECLS }              \
  namespace avx512 { DECLS }
#else
#define DIFFNET_CPU_DISPATCH(...) return base::__VA_ARGS__;
#define DIFFNET_CPU_FOR_EACH_ISA(DECLS) \
  namespace base { DECLS }
#endif
