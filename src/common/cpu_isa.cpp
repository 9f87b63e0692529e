// The kernels' instruction-set level (include/diffnet/cpu_isa.h): CPUID through GCC's __builtin_cpu_supports
// (which also checks that the operating system saves the wider registers), an environment override.
#include "diffnet/cpu_isa.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "diffnet/common.h"

namespace diffnet {
namespace {

std::atomic<int> g_isa{-1};
std::once_flag g_isa_decided;

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx2: return "avx2";
    default: return "base";
  }
}

CpuIsa parse_cpu_isa(const std::string& name, const char* what) {
  if (name == "base") return CpuIsa::kBase;
  if (name == "avx2") return CpuIsa::kAvx2;
  if (name == "avx512") return CpuIsa::kAvx512;
  throw Error(what, "'" + name + "' is not one of base, avx2, avx512, auto");
}

CpuIsa cpu_isa_supported() {
#if DIFFNET_CPU_MULTI_ISA
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return CpuIsa::kAvx512;
  if (avx2) return CpuIsa::kAvx2;
#endif
  return CpuIsa::kBase;
}

namespace {

// isa, or an Error naming `what` when it is above cpu_isa_supported().
CpuIsa supported_or_error(CpuIsa isa, const char* what) {
  const CpuIsa top = cpu_isa_supported();
  if (static_cast<int>(isa) > static_cast<int>(top))
    throw Error(what, std::string(cpu_isa_name(isa)) + " is above what this CPU and build support (" +
                          cpu_isa_name(top) + ")");
  return isa;
}

}  // namespace

void set_cpu_isa(CpuIsa isa) { g_isa.store(static_cast<int>(supported_or_error(isa, "cpu isa"))); }

CpuIsa cpu_isa() {
  const int v = g_isa.load(std::memory_order_relaxed);
  if (v >= 0) return static_cast<CpuIsa>(v);
  std::call_once(g_isa_decided, [] {
    if (g_isa.load() >= 0) return;  // set_cpu_isa came first
    const char* env = std::getenv("DIFFNET_CPU_ISA");
    const bool named = env && *env && std::string(env) != "auto";
    g_isa.store(static_cast<int>(named ? supported_or_error(parse_cpu_isa(env, "DIFFNET_CPU_ISA"), "DIFFNET_CPU_ISA")
                                       : cpu_isa_supported()));
  });
  return static_cast<CpuIsa>(g_isa.load());
}

}  // namespace diffnet
