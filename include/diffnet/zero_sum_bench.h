// `diffnet bench --op zero-sum`: dense vs fused timings on the stage shapes of `base` (issue 3).
#pragma once

#include <string>

namespace diffnet::ops {

struct ZeroSumBenchOptions {
  bool json = false;       // one JSON object per line instead of a table
  int iters = 5;           // timed iterations per case (median reported), after 1 warm-up
  std::string device = "cpu";  // "cpu" | "cuda"
  bool quick = false;      // small shapes only (for tests)
};

// Runs the benchmark, printing to stdout. Returns 0.
int run_zero_sum_bench(const ZeroSumBenchOptions& opt);

}  // namespace diffnet::ops
