// The kernels' instruction-set levels (include/diffnet/cpu_isa.h): each level reaches its own compiled copy
// of the kernels (told apart by their vector width), names and errors. With $DIFFNET_TEST_CPU_ISA set (the
// ctest entries ops_isa_base and ops_isa_avx2), every test of this program runs at that level instead of
// the CPU's highest, so the float64 references of the other ops tests check each copy; on a CPU without
// that level the whole program is skipped.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "diffnet/common.h"
#include "diffnet/cpu_isa.h"
#include "ops/zero_sum/cpu/zero_sum_kernel.h"

namespace diffnet {
namespace {

class LevelFromEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* want = std::getenv("DIFFNET_TEST_CPU_ISA");
    if (!want || !*want) return;
    const CpuIsa isa = parse_cpu_isa(want, "DIFFNET_TEST_CPU_ISA");
    if (static_cast<int>(isa) > static_cast<int>(cpu_isa_supported())) {
      // The line ctest's SKIP_REGULAR_EXPRESSION looks for (tests/ops.cmake).
      std::printf("no level %s on this CPU and build (up to %s): skipped\n", want, cpu_isa_name(cpu_isa_supported()));
      GTEST_SKIP();
    }
    set_cpu_isa(isa);
    std::printf("kernels at level %s\n", cpu_isa_name(cpu_isa()));
  }
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new LevelFromEnvironment);

// Restores the level a test found.
struct LevelGuard {
  CpuIsa saved = cpu_isa();
  ~LevelGuard() { set_cpu_isa(saved); }
};

TEST(CpuIsa, EachLevelRunsItsOwnKernels) {
  LevelGuard guard;
  const int top = static_cast<int>(cpu_isa_supported());
  for (int level = 0; level <= top; ++level) {
    set_cpu_isa(static_cast<CpuIsa>(level));
    EXPECT_EQ(static_cast<int>(cpu_isa()), level);
    const int64_t lanes = ops::cpu::zero_sum_nhwc_lanes<float>();
    const int64_t dlanes = ops::cpu::zero_sum_nhwc_lanes<double>();
    // float lanes of the level's vectors: 16 bytes at base (32 or 64 in a DIFFNET_NATIVE build), 32 at
    // avx2, 64 at avx512; double lanes half as many.
    if (level == static_cast<int>(CpuIsa::kAvx512)) {
      EXPECT_EQ(lanes, 16);
    } else if (level == static_cast<int>(CpuIsa::kAvx2)) {
      EXPECT_EQ(lanes, 8);
    } else {
      EXPECT_TRUE(lanes == 4 || lanes == 8 || lanes == 16) << lanes;
    }
    EXPECT_EQ(dlanes * 2, lanes);
  }
}

TEST(CpuIsa, NamesAndErrors) {
  for (CpuIsa isa : {CpuIsa::kBase, CpuIsa::kAvx2, CpuIsa::kAvx512})
    EXPECT_EQ(parse_cpu_isa(cpu_isa_name(isa), "test"), isa);
  EXPECT_THROW(parse_cpu_isa("sse9", "test"), Error);
  EXPECT_THROW(parse_cpu_isa("AVX2", "test"), Error);
  if (cpu_isa_supported() != CpuIsa::kAvx512) {
    LevelGuard guard;
    EXPECT_THROW(set_cpu_isa(CpuIsa::kAvx512), Error);
  }
#if !DIFFNET_CPU_MULTI_ISA
  EXPECT_EQ(cpu_isa_supported(), CpuIsa::kBase);
#endif
}

}  // namespace
}  // namespace diffnet
