// `diffnet bench` for the model: median time of inference or of a full training step (the trainer's
// loss and AdamW), on the CPU or a GPU, fp32 or bf16, optionally replayed as a CUDA graph.
#pragma once

#include <string>
#include <vector>

namespace diffnet {

struct ModelBenchOptions {
  std::string preset = "atto";
  std::vector<std::string> ablations;  // "A0".."A20", applied in order
  int64_t size = 512;                  // square input side (multiple of 32)
  std::string mode = "infer";          // infer (eval, no grad) | train (fwd + focal loss + bwd + AdamW step)
  int64_t batch = 1;
  int iters = 10;
  int warmup = 2;
  std::string disc_impl = "";          // "" = the config's (dense|fused)
  std::string dtype = "f32";           // f32 | bf16 (inference only: model and input converted)
  bool amp = false;                    // bf16 autocast, fp32 weights (inference and training)
  std::string device = "cpu";          // cpu | cuda | cuda:N
  bool graph = false;                  // CUDA only: capture one iteration as a CUDA graph, time replays
  bool parts = false;                  // also each part: forward time (synchronised), GFLOP, share of the matrix rate
  bool json = false;
  bool quiet = false;                  // no progress line
  std::string profile;                 // write a Chrome trace (Kineto profiler) of three more iterations here
};

// Runs the benchmark and prints one line (or one JSON object). Returns 0.
int run_model_bench(const ModelBenchOptions& opt);

}  // namespace diffnet
