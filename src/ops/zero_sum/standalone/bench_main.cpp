// `zero_sum_bench [--json] [--iters N] [--device cpu|cuda] [--quick] [--layout L] [--all-dense] [--filter S]
// [--clock wall|cpu] [--layout-report]`: the zero-sum benchmark
// (run_zero_sum_bench) without the diffnet CLI, for the standalone ops build (scripts/gpu-check.sh).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "diffnet/common.h"
#include "diffnet/zero_sum_bench.h"

int main(int argc, char** argv) {
  diffnet::ops::ZeroSumBenchOptions opt;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](const char* name) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "error: %s needs a value\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--json")) opt.json = true;
    else if (!std::strcmp(argv[i], "--quick")) opt.quick = true;
    else if (!std::strcmp(argv[i], "--iters")) opt.iters = std::atoi(next("--iters"));
    else if (!std::strcmp(argv[i], "--device")) opt.device = next("--device");
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(next("--threads"));
    else if (!std::strcmp(argv[i], "--layout")) opt.layout = next("--layout");
    else if (!std::strcmp(argv[i], "--all-dense")) opt.all_dense = true;
    else if (!std::strcmp(argv[i], "--filter")) opt.filter = next("--filter");
    else if (!std::strcmp(argv[i], "--clock")) opt.clock = next("--clock");
    else if (!std::strcmp(argv[i], "--layout-report")) opt.layout_report = true;
    else {
      std::fprintf(stderr, "usage: zero_sum_bench [--json] [--iters N] [--device cpu|cuda] [--quick] [--threads N]\n"
                   "       [--layout channels_last|nchw] [--all-dense] [--filter NAME] [--clock wall|cpu]\n"
                   "       [--layout-report]\n");
      return 2;
    }
  }
  try {
    diffnet::init_runtime(threads);
    return diffnet::ops::run_zero_sum_bench(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
