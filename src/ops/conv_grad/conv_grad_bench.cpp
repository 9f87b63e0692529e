// `diffnet bench --op conv-grad` (include/diffnet/conv_grad.h): the convolutions' weight + bias gradient,
// LibTorch's (oneDNN) against the matrix product, at the shapes of an atto 512² batch-2 training step.
#include <ATen/ATen.h>
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "diffnet/common.h"
#include "diffnet/conv_grad.h"
#include "ops/op_bench.h"

namespace diffnet::ops {
int run_conv_grad_bench(int iters, bool json) {
  if (iters < 1) throw Error("bench", "--iters must be >= 1");
  struct Case {
    const char* name;
    int64_t B, C, S, N, K;
  };
  // The blocks' Linear layers (stages 1-4 and the DCT branch, both directions) and the decoder's 3x3.
  const Case cases[] = {{"s1-fc1", 2, 40, 128, 160, 1},  {"s1-fc2", 2, 160, 128, 40, 1},
                        {"s2-fc1", 2, 80, 64, 320, 1},   {"s2-fc2", 2, 320, 64, 80, 1},
                        {"dct-fc1", 2, 64, 64, 256, 1},  {"dct-fc2", 2, 256, 64, 64, 1},
                        {"s3-fc1", 2, 160, 32, 640, 1},  {"s3-fc2", 2, 640, 32, 160, 1},
                        {"s4-fc1", 2, 320, 16, 1280, 1}, {"s4-fc2", 2, 1280, 16, 320, 1},
                        {"head-3x3", 2, 64, 128, 64, 3}};
  if (!json)
    std::printf("%-9s %-22s %12s %12s %8s\n", "case", "shape (B,C,S,N,K)", "libtorch ms", "ours ms", "speedup");
  for (const Case& c : cases) {
    torch::manual_seed(0);
    const at::Tensor x = at::randn({c.B, c.C, c.S, c.S}).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor g = at::randn({c.B, c.N, c.S, c.S}).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor w = at::randn({c.N, c.C, c.K, c.K}) * 0.05;
    const int64_t p = c.K / 2, N = c.N;
    auto step = [&](bool ours) {
      const double t0 = now_seconds();
      if (ours)
        (void)conv_weight_grad_gemm(g, x, c.K, p);
      else
        (void)at::convolution_backward(g, x, w, at::IntArrayRef(&N, 1), {1, 1}, {p, p}, {1, 1}, false, {0, 0}, 1,
                                       {false, true, true});
      return (now_seconds() - t0) * 1e3;
    };
    const auto [a, o] = alternated_medians(iters, step);
    const std::string shape = std::to_string(c.B) + "," + std::to_string(c.C) + "," + std::to_string(c.S) + "," +
                              std::to_string(c.N) + "," + std::to_string(c.K);
    if (json)
      std::printf("{\"case\":\"%s\",\"shape\":[%s],\"libtorch_ms\":%.4f,\"ours_ms\":%.4f,\"speedup\":%.3f,"
                  "\"threads\":%d}\n",
                  c.name, shape.c_str(), a, o, a / o, at::get_num_threads());
    else
      std::printf("%-9s %-22s %12.3f %12.3f %7.2fx\n", c.name, shape.c_str(), a, o, a / o);
    std::fflush(stdout);
  }
  return 0;
}
}  // namespace diffnet::ops
