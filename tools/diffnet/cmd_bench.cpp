// diffnet bench: model throughput (inference / training step) or, with --op, an operator benchmark (zero-sum:
// the filter op; depthwise: the blocks' depthwise convolution with our CPU backward; conv-grad: the
// convolutions' weight gradient, oneDNN vs a matrix product; grn: the MLP's GRN, composite vs fused).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "diffnet/common.h"
#include "diffnet/conv_grad.h"
#include "diffnet/depthwise.h"
#include "diffnet/grn.h"
#include "train/bench.h"
#ifdef DIFFNET_HAVE_ZERO_SUM_BENCH
#include "diffnet/zero_sum_bench.h"
#endif

namespace diffnet::cli {
namespace {

struct BenchOptions {
  ModelBenchOptions model;
  std::string op;
  bool quick = false;
};

void run(BenchOptions& o) {
  if (!o.op.empty()) {
    if (o.op == "depthwise") {
      if (o.model.device != "cpu") throw Error("bench", "--op depthwise: CPU only (the own backward is a CPU kernel)");
      exit_code() = ops::run_depthwise_bench(o.model.iters, o.model.json);
      return;
    }
    if (o.op == "conv-grad") {
      if (o.model.device != "cpu") throw Error("bench", "--op conv-grad: CPU only (the product replaces a CPU pass)");
      exit_code() = ops::run_conv_grad_bench(o.model.iters, o.model.json);
      return;
    }
    if (o.op == "grn") {
      if (o.model.device != "cpu") throw Error("bench", "--op grn: CPU only (the fused GRN is a CPU kernel)");
      exit_code() = ops::run_grn_bench(o.model.iters, o.model.json);
      return;
    }
    if (o.op != "zero-sum")
      throw Error("bench", "--op must be 'zero-sum', 'depthwise', 'conv-grad' or 'grn', got '" + o.op + "'");
#ifdef DIFFNET_HAVE_ZERO_SUM_BENCH
    ops::ZeroSumBenchOptions zo;
    zo.json = o.model.json;
    zo.iters = o.model.iters;
    zo.device = o.model.device;
    zo.quick = o.quick;
    exit_code() = ops::run_zero_sum_bench(zo);
    return;
#else
    throw Error("bench", "--op zero-sum: not built (the zero-sum benchmark is not part of this build)");
#endif
  }
  exit_code() = run_model_bench(o.model);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto& m = o->model;
  CLI::App* sub = app.add_subcommand("bench", "Benchmark DiffNet inference or training steps (median after warm-up)");
  sub->add_option("--preset", m.preset, "Model preset")->capture_default_str();
  sub->add_option("--ablation", m.ablations, "Paper ablation(s) A0..A20 applied to the preset")->expected(1, -1);
  sub->add_option("--size", m.size, "Square input side (multiple of 32)")->capture_default_str();
  sub->add_option("--mode", m.mode, "infer (eval, no grad) | train (forward + loss + backward + AdamW step)")
      ->capture_default_str();
  sub->add_option("--batch", m.batch, "Batch size")->capture_default_str();
  sub->add_option("--iters", m.iters, "Timed iterations (median reported)")->capture_default_str();
  sub->add_option("--warmup", m.warmup, "Untimed warm-up iterations")->capture_default_str();
  sub->add_option("--disc-impl", m.disc_impl, "Discrepancy implementation: dense | fused (default: the preset's)");
  sub->add_option("--dtype", m.dtype, "f32 | bf16 (bf16: inference only, whole model converted)")
      ->capture_default_str();
  sub->add_flag("--amp", m.amp, "bf16 autocast with fp32 weights (inference and training)");
  sub->add_flag("--graph", m.graph, "CUDA: capture one inference as a CUDA graph and time its replays");
  sub->add_flag("--parts", m.parts, "Also report each model part: forward time (synchronised), analytic GFLOP and their share of this machine's matrix rate (measured)");
  sub->add_flag("--json", m.json, "One JSON object instead of a text line");
  sub->add_flag("--quiet", m.quiet, "No progress line");
  sub->add_option("--profile", m.profile, "Write a Chrome trace (LibTorch Kineto profiler: operators, GPU kernels) of three more iterations to FILE; scripts/trace-summary.py sums it");
  sub->add_option("--op", o->op, "Benchmark an operator instead of the model: zero-sum | depthwise | conv-grad | grn");
  sub->add_option("--device", m.device, "cpu | cuda | cuda:N")->capture_default_str();
  sub->add_flag("--quick", o->quick, "With --op: small shapes only");
  sub->callback([o] { run(*o); });
}

}  // namespace diffnet::cli
