// `diffnet bench --op grn` (include/diffnet/grn.h): the composite GRN against the fused one, and GELU then
// GRN against gelu_grn.
#include <ATen/ATen.h>
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include "diffnet/common.h"
#include "diffnet/grn.h"
#include "ops/op_bench.h"

namespace diffnet::ops {

int run_grn_bench(int iters, bool json) {
  if (iters < 1) throw Error("bench", "--iters must be >= 1");
  struct Case {
    const char* name;
    int64_t B, S, C;  // images, side, channels of the MLP's hidden layer (4x the stage's)
  };
  const Case cases[] = {{"atto-s1", 2, 128, 160}, {"atto-s2", 2, 64, 320},  {"atto-s3", 2, 32, 640},
                        {"atto-s4", 2, 16, 1280}, {"base-s1", 1, 192, 512}, {"base-s2", 1, 96, 1024},
                        {"base-s3", 1, 48, 2048}, {"base-s4", 1, 24, 4096}};
  if (!json)
    std::printf("%-8s %-18s %-8s %14s %10s %8s\n", "case", "shape (B,H,W,C)", "pass", "baseline ms", "fused ms",
                "speedup");
  // GRN alone: the composite against the fused kernel; GELU + GRN: at::gelu then grn() against gelu_grn().
  struct Op {
    const char *name, *base_key;
    bool gelu;
  };
  for (const Op op : {Op{"grn", "composite_ms", false}, Op{"gelu_grn", "separate_ms", true}}) {
    if (!json) std::printf("%s: %s against fused\n", op.name, op.gelu ? "at::gelu + grn()" : "composite");
    for (const Case& c : cases) {
      torch::manual_seed(0);
      const at::Tensor x0 = at::randn({c.B, c.S, c.S, c.C}), g = at::randn({c.B, c.S, c.S, c.C});
      const at::Tensor w0 = at::randn({c.C}) * 0.1, b0 = at::randn({c.C}) * 0.1;
      for (const bool backward : {false, true}) {
        auto step = [&](bool fused) {
          at::Tensor x = x0.clone().requires_grad_(backward), w = w0.clone().requires_grad_(backward),
                     b = b0.clone().requires_grad_(backward);
          const double t0 = now_seconds();
          at::Tensor y = op.gelu ? (fused ? gelu_grn(x, w, b) : grn(at::gelu(x), w, b))
                              : (fused ? grn(x, w, b) : grn_composite(x, w, b));
          if (backward) y.backward(g);
          return (now_seconds() - t0) * 1e3;
        };
        const auto [a, o] = alternated_medians(iters, step);
        const char* pass = backward ? "fwd+bwd" : "fwd";
        if (json)
          std::printf("{\"op\":\"%s\",\"case\":\"%s\",\"shape\":[%ld,%ld,%ld,%ld],\"pass\":\"%s\",\"%s\":%.4f,"
                      "\"fused_ms\":%.4f,\"speedup\":%.3f,\"threads\":%d}\n",
                      op.name, c.name, static_cast<long>(c.B), static_cast<long>(c.S), static_cast<long>(c.S),
                      static_cast<long>(c.C), pass, op.base_key, a, o, a / o, at::get_num_threads());
        else
          std::printf("%-8s %-18s %-8s %14.3f %10.3f %7.2fx\n", c.name,
                      (std::to_string(c.B) + "x" + std::to_string(c.S) + "x" + std::to_string(c.S) + "x" +
                       std::to_string(c.C)).c_str(), pass, a, o, a / o);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace diffnet::ops
