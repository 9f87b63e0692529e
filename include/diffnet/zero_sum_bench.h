// `diffnet bench --op zero-sum`: dense vs fused timings on the stage shapes of `base`.
#pragma once

#include <string>

namespace diffnet::ops {

struct ZeroSumBenchOptions {
  bool json = false;       // one JSON object per line instead of a table
  int iters = 5;           // timed iterations per case (median reported), after 1 warm-up
  std::string device = "cpu";  // "cpu" | "cuda"
  bool quick = false;      // small shapes only (for tests)
  std::string layout = "channels_last";  // input layout: "channels_last" (as in the model) | "nchw"
  bool all_dense = false;  // time every dense LibTorch composition, one line each (how the best was picked)
  std::string filter;      // only cases whose name contains this (e.g. "512-s4"); empty = all
  // "wall" (default) or "cpu": process CPU time, robust on a shared machine when run with 1 thread.
  // The environment variable DIFFNET_BENCH_CLOCK=cpu|wall overrides it (also for `diffnet bench`).
  std::string clock = "wall";
  // Instead of dense vs fused: the fused forward on channels_last input returning channels_last (what the
  // op does) vs returning NCHW, alone and followed by what the decoder does with it (add a channels_last
  // map, make the sum channels_last). One line per case: {"case","shape","cl_out_ms","nchw_out_ms",
  // "cl_out_consumer_ms","nchw_out_consumer_ms",...}.
  bool layout_report = false;
};

// Runs the benchmark, printing to stdout: with json one line per case and pass,
//   {"case":..,"shape":[B,C,H,W],"pass":"fwd"|"fwd+bwd","dense_ms":..,"fused_ms":..,"speedup":..,
//    "dense_variant":..,"device":..,"layout":..,"threads":..,"clock":..}
// else a table. "fwd" runs without autograd; "fwd+bwd" computes all four gradients. "dense" is the faster
// of the split and split_cl compositions for each case (dense_variant names it). Returns 0; throws
// diffnet::Error for bad options (unknown device/layout, cuda without CUDA kernels or device).
int run_zero_sum_bench(const ZeroSumBenchOptions& opt);

}  // namespace diffnet::ops
