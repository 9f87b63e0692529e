// Standalone zero-sum operator checks without GoogleTest (run by scripts/gpu-check.sh): the agreement,
// finite-difference and determinism sweep of test_ops_checks.h on the CPU and, when this build has the
// CUDA kernels and a GPU is present, on CUDA, plus fused CUDA vs fused CPU on a stage-sized input.
// Exit status: 0 all passed, 1 failures.
#include <ATen/ATen.h>

#include <cstdio>
#include <cstring>

#include "diffnet/common.h"
#include "diffnet/zero_sum.h"
#include "test_ops_checks.h"

int main(int argc, char** argv) {
  using namespace diffnet;
  init_runtime(0);
  bool cpu = true;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--cuda-only") == 0) cpu = false;
  int failures = 0;
  if (cpu) failures += opstest::run_device_checks(at::kCPU, true);
  if (!ops::zero_sum_has_cuda()) {
    std::printf("[cuda] SKIPPED: built without DIFFNET_CUDA\n");
  } else if (!ops::zero_sum_cuda_available()) {
    std::printf("[cuda] SKIPPED: no usable CUDA device\n");
  } else {
    failures += opstest::run_device_checks(at::Device(at::kCUDA, 0), true);
    // Stage-sized float32: CUDA fused vs CPU fused.
    opstest::Case c{2, 64, 96, 80, 7, 2, 1};
    opstest::Inputs in = opstest::make_inputs(c, 42);
    opstest::Result gpu = opstest::run_impl(in, c.n_free, "fused", at::Device(at::kCUDA, 0), at::kFloat);
    opstest::Result cpu_r = opstest::run_impl(in, c.n_free, "fused", at::kCPU, at::kFloat);
    double d = opstest::max_rel_diff(gpu, cpu_r);
    std::printf("[cuda] fused CUDA vs CPU float32 %s: max rel diff %.3g\n", c.str().c_str(), d);
    if (!(d < 1e-4)) {
      std::fprintf(stderr, "FAIL cuda vs cpu float32: %g\n", d);
      ++failures;
    }
    if (!opstest::deterministic(c, at::Device(at::kCUDA, 0), at::kFloat, 43)) {
      std::fprintf(stderr, "FAIL cuda determinism on %s\n", c.str().c_str());
      ++failures;
    }
  }
  std::printf("%s (%d failures)\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
