// `diffnet bench` for the model: median iteration time of inference or a full training step.
#pragma once

#include <string>
#include <vector>

namespace diffnet {

struct ModelBenchOptions {
  std::string preset = "atto";
  std::vector<std::string> ablations;  // "A0".."A20", applied in order
  int64_t size = 512;                  // square input side (multiple of 32)
  std::string mode = "infer";          // infer (eval, no grad) | train (fwd + loss + bwd + AdamW step)
  int64_t batch = 1;
  int iters = 10;
  int warmup = 2;
  std::string disc_impl = "";          // "" = the config's (dense|fused)
  std::string dtype = "f32";           // f32 | bf16 (inference only: model and input converted)
  bool json = false;
  bool quiet = false;                  // no progress line
  std::string profile;                 // write a Chrome trace (autograd profiler) of one extra iteration here
};

// Runs the benchmark and prints one line (or one JSON object). Returns 0.
int run_model_bench(const ModelBenchOptions& opt);

}  // namespace diffnet
