// `diffnet bench --op depthwise` (include/diffnet/depthwise.h): LibTorch's depthwise backward vs ours, and
// LibTorch's inference convolution + LayerNorm vs depthwise_layer_norm.
#include <ATen/ATen.h>
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "diffnet/common.h"
#include "diffnet/depthwise.h"
#include "ops/op_bench.h"

namespace diffnet::ops {
int run_depthwise_bench(int iters, bool json) {
  if (iters < 1) throw Error("bench", "--iters must be >= 1");
  struct Case {
    const char* name;
    int64_t B, C, S;
  };
  const Case cases[] = {{"atto-s1", 2, 40, 128},  {"atto-s2", 2, 80, 64},  {"atto-s3", 2, 160, 32},
                        {"atto-s4", 2, 320, 16},  {"base-s1", 1, 128, 192}, {"base-s2", 1, 256, 96},
                        {"base-s3", 1, 512, 48},  {"base-s4", 1, 1024, 24}};
  // One case's medians (LibTorch's, ours): a table row, or a JSON object with the pass it timed.
  auto print_row = [json](const Case& c, const char* pass, std::pair<double, double> t) {
    const auto [a, o] = t;
    if (json)
      std::printf("{\"case\":\"%s\",\"shape\":[%ld,%ld,%ld,%ld],\"pass\":\"%s\",\"libtorch_ms\":%.4f,"
                  "\"ours_ms\":%.4f,\"speedup\":%.3f,\"threads\":%d}\n",
                  c.name, static_cast<long>(c.B), static_cast<long>(c.C), static_cast<long>(c.S),
                  static_cast<long>(c.S), pass, a, o, a / o, at::get_num_threads());
    else
      std::printf("%-8s %-18s %12.3f %12.3f %7.2fx\n", c.name,
                  (std::to_string(c.B) + "x" + std::to_string(c.C) + "x" + std::to_string(c.S) + "x" +
                   std::to_string(c.S)).c_str(), a, o, a / o);
    std::fflush(stdout);
  };
  if (!json) std::printf("%-8s %-18s %12s %12s %8s\n", "case", "shape", "libtorch ms", "ours ms", "speedup");
  for (const Case& c : cases) {
    torch::manual_seed(0);
    const at::Tensor x0 = at::randn({c.B, c.C, c.S, c.S}).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor g = at::randn({c.B, c.C, c.S, c.S}).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor w0 = at::randn({c.C, 1, 7, 7}) * 0.1, b0 = at::randn({c.C});
    auto step = [&](bool ours) {
      at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
                 b = b0.clone().requires_grad_(true);
      const double t0 = now_seconds();
      at::Tensor y = ours ? depthwise_conv(x, w, b) : at::conv2d(x, w, b, {1, 1}, {3, 3}, {1, 1}, c.C);
      y.backward(g);
      return (now_seconds() - t0) * 1e3;
    };
    print_row(c, "fwd+bwd", alternated_medians(iters, step));
  }
  // Inference: LibTorch's convolution then LayerNorm over the channels in float32 (what the blocks ran
  // before; in bf16, as model::layer_norm_last does: to float32 and back) against depthwise_layer_norm, at
  // the shapes of an atto 256² batch-8 forward (stages 1-4; the DCT branch and the decoder's refinement run
  // C = 64 at 32²) and of base at 768², batch 1, in float32 and in bf16; every shape is timed, also where
  // the blocks do not use the fusion (depthwise_layer_norm_applies), as the record of why.
  const Case infer_cases[] = {{"atto-s1", 8, 40, 64},   {"atto-dct", 8, 64, 32},  {"atto-s2", 8, 80, 32},
                              {"atto-s3", 8, 160, 16},  {"atto-s4", 8, 320, 8},   {"base-s1", 1, 128, 192},
                              {"base-s2", 1, 256, 96},  {"base-s3", 1, 512, 48},  {"base-s4", 1, 1024, 24}};
  torch::NoGradGuard no_grad;
  for (const at::ScalarType dt : {at::kFloat, at::kBFloat16}) {
    const bool bf16 = dt == at::kBFloat16;
    if (!json)
      std::printf("\ninference%s: conv2d + layer_norm%s (libtorch) vs depthwise_layer_norm (ours)\n",
                  bf16 ? " in bf16" : "", bf16 ? " in float32" : "");
    for (const Case& c : infer_cases) {
      torch::manual_seed(0);
      const at::Tensor x = at::randn({c.B, c.C, c.S, c.S}).to(dt).contiguous(at::MemoryFormat::ChannelsLast);
      const at::Tensor w = (at::randn({c.C, 1, 7, 7}) * 0.1).to(dt), b = at::randn({c.C}).to(dt);
      const at::Tensor lw = at::randn({c.C}).to(dt), lb = at::randn({c.C}).to(dt);
      auto step = [&](bool ours) {
        const double t0 = now_seconds();
        at::Tensor y =
            ours ? depthwise_layer_norm(x, w, b, lw, lb, 1e-6)
                 : at::layer_norm(at::conv2d(x, w, b, {1, 1}, {3, 3}, {1, 1}, c.C).permute({0, 2, 3, 1}).to(at::kFloat),
                                  {c.C}, lw.to(at::kFloat), lb.to(at::kFloat), 1e-6)
                       .to(dt);
        return (now_seconds() - t0) * 1e3;
      };
      print_row(c, bf16 ? "infer dw+ln bf16" : "infer dw+ln", alternated_medians(iters, step));
    }
  }
  return 0;
}

}  // namespace diffnet::ops
