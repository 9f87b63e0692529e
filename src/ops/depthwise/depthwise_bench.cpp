// `diffnet bench --op depthwise` (include/diffnet/depthwise.h): LibTorch's depthwise backward vs ours.
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
    const auto [a, o] = alternated_medians(iters, step);
    if (json)
      std::printf("{\"case\":\"%s\",\"shape\":[%ld,%ld,%ld,%ld],\"pass\":\"fwd+bwd\",\"libtorch_ms\":%.4f,"
                  "\"ours_ms\":%.4f,\"speedup\":%.3f,\"threads\":%d}\n",
                  c.name, static_cast<long>(c.B), static_cast<long>(c.C), static_cast<long>(c.S),
                  static_cast<long>(c.S), a, o, a / o, at::get_num_threads());
    else
      std::printf("%-8s %-18s %12.3f %12.3f %7.2fx\n", c.name,
                  (std::to_string(c.B) + "x" + std::to_string(c.C) + "x" + std::to_string(c.S) + "x" +
                   std::to_string(c.S)).c_str(), a, o, a / o);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace diffnet::ops
