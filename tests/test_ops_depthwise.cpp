// The depthwise convolution with our CPU backward (include/diffnet/depthwise.h) against LibTorch's own
// convolution and its autograd in float64 (a different code path: ATen's reference convolution), for
// several kernel sizes, channel counts that are and are not multiples of the kernels' register chunk,
// pages smaller than the kernel, both layouts; plus the fallbacks and the argument checks.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <string>

#include "diffnet/common.h"
#include "diffnet/cpu_isa.h"
#include "diffnet/depthwise.h"
#include "ops_test_util.h"

namespace {

using testutil::Grads;
using testutil::rel_err;
using testutil::run_grads;

using diffnet::ops::depthwise_conv;

at::Tensor reference(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  const int64_t K = w.size(2);
  return at::conv2d(x, w, b, {1, 1}, {K / 2, K / 2}, {1, 1}, x.size(1));
}

struct Case {
  int64_t B, C, H, W, K;
};

std::string case_name(const Case& c) {
  return "B" + std::to_string(c.B) + " C" + std::to_string(c.C) + " " + std::to_string(c.H) + "x" +
         std::to_string(c.W) + " K" + std::to_string(c.K);
}

TEST(Depthwise, BackwardMatchesLibTorchInFloat64AndFloat32) {
  torch::manual_seed(7);
  const Case cases[] = {{2, 40, 13, 11, 7}, {1, 16, 8, 9, 7}, {2, 37, 7, 20, 7}, {1, 5, 3, 4, 7},
                        {3, 33, 6, 5, 3},   {1, 18, 10, 6, 5}, {2, 17, 4, 12, 9}, {1, 8, 5, 5, 1}};
  for (const Case& c : cases) {
    const std::string name = case_name(c);
    at::Tensor x = at::randn({c.B, c.C, c.H, c.W}, at::kDouble).contiguous(at::MemoryFormat::ChannelsLast);
    at::Tensor w = at::randn({c.C, 1, c.K, c.K}, at::kDouble);
    at::Tensor b = at::randn({c.C}, at::kDouble);
    at::Tensor r = at::randn({c.B, c.C, c.H, c.W}, at::kDouble);
    ASSERT_TRUE(diffnet::ops::depthwise_uses_own_backward(x.clone().requires_grad_(true), w)) << name;
    const Grads ref = run_grads(reference, x, w, b, r);
    const Grads d64 = run_grads(depthwise_conv, x, w, b, r);
    EXPECT_LT(rel_err(d64.y, ref.y), 1e-14) << name;
    EXPECT_LT(rel_err(d64.dx, ref.dx), 1e-13) << name;
    EXPECT_LT(rel_err(d64.dw, ref.dw), 1e-13) << name;
    EXPECT_LT(rel_err(d64.db, ref.db), 1e-13) << name;
    // float32 (the training dtype) against the float64 reference; NCHW input too.
    for (const bool cl : {true, false}) {
      at::Tensor x32 = x.to(at::kFloat).contiguous(cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
      const Grads d32 = run_grads(depthwise_conv, x32, w.to(at::kFloat), b.to(at::kFloat), r.to(at::kFloat));
      EXPECT_LT(rel_err(d32.dx, ref.dx), 2e-6) << name << (cl ? " channels_last" : " NCHW");
      EXPECT_LT(rel_err(d32.dw, ref.dw), 2e-6) << name << (cl ? " channels_last" : " NCHW");
      EXPECT_LT(rel_err(d32.db, ref.db), 2e-6) << name << (cl ? " channels_last" : " NCHW");
    }
  }
}

// Partial sums over fixed row blocks, added in a fixed order: the weight gradient has the same bits with
// one thread as with several.
TEST(Depthwise, WeightGradientIsTheSameForAnyThreadCount) {
  torch::manual_seed(3);
  at::Tensor x = at::randn({2, 40, 33, 29}).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor g = at::randn({2, 40, 33, 29}).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor w = at::randn({40, 1, 7, 7});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  auto [dx1, dw1, db1] = diffnet::ops::depthwise_conv_backward(g, x, w, false);
  at::set_num_threads(std::max(2, threads));
  auto [dx2, dw2, db2] = diffnet::ops::depthwise_conv_backward(g, x, w, false);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(dw1, dw2));
}

// Only gradients asked for are computed; without autograd (inference) or with DIFFNET_DEPTHWISE=aten
// semantics elsewhere, the result is at::conv2d's exactly.
TEST(Depthwise, FallbacksAndInputGradientSkipped) {
  torch::manual_seed(5);
  at::Tensor x = at::randn({1, 24, 10, 10}).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor w = at::randn({24, 1, 7, 7}), b = at::randn({24});
  {
    torch::NoGradGuard no_grad;
    EXPECT_FALSE(diffnet::ops::depthwise_uses_own_backward(x, w.clone().requires_grad_(true)));
    EXPECT_TRUE(at::equal(depthwise_conv(x, w, b), reference(x, w, b)));
  }
  EXPECT_FALSE(diffnet::ops::depthwise_uses_own_backward(x, w)) << "nothing requires grad";
  auto [dx, dw, db] = diffnet::ops::depthwise_conv_backward(at::ones_like(x), x, w, false);
  EXPECT_FALSE(dx.defined());
  EXPECT_TRUE(dw.defined() && db.defined());
  // A frozen input (first layer): only the weights get gradients, and they match.
  at::Tensor wg = w.clone().requires_grad_(true);
  depthwise_conv(x, wg, b).sum().backward();
  at::Tensor wr = w.clone().requires_grad_(true);
  reference(x, wr, b).sum().backward();
  EXPECT_LT(rel_err(wg.grad(), wr.grad()), 1e-5);
  // No bias.
  at::Tensor xg = x.clone().requires_grad_(true);
  depthwise_conv(xg, w.clone().requires_grad_(true), at::Tensor()).sum().backward();
  at::Tensor xr = x.clone().requires_grad_(true);
  reference(xr, w, at::Tensor()).sum().backward();
  EXPECT_LT(rel_err(xg.grad(), xr.grad()), 1e-5);
}

TEST(Depthwise, ArgumentErrors) {
  at::Tensor x = at::randn({1, 8, 6, 6});
  try {
    depthwise_conv(x, at::randn({8, 1, 4, 4}), at::Tensor());
    FAIL() << "even kernel accepted";
  } catch (const diffnet::Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight must be (C, 1, K, K) with C = 8 and K odd <= 9"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(depthwise_conv(x, at::randn({4, 1, 3, 3}), at::Tensor()), diffnet::Error);
  EXPECT_THROW(diffnet::ops::depthwise_conv_backward(at::randn({1, 8, 5, 6}), x, at::randn({8, 1, 3, 3}), true),
               diffnet::Error);
  EXPECT_THROW(diffnet::ops::depthwise_conv_backward(x.to(at::kBFloat16), x.to(at::kBFloat16),
                                                     at::randn({8, 1, 3, 3}).to(at::kBFloat16), true),
               diffnet::Error);
}

// `diffnet bench --op depthwise --json`: one object per case, both timings positive, the ratio theirs:
// 8 training cases, then 9 inference cases in float32 and 9 in bf16.
TEST(Depthwise, BenchPrintsEveryCase) {
  testing::internal::CaptureStdout();
  EXPECT_EQ(diffnet::ops::run_depthwise_bench(1, true), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(testutil::expect_bench_lines(out, "{\"case\":", "libtorch_ms", "ours_ms"), 26u) << out;
  EXPECT_NE(out.find("\"case\":\"base-s4\",\"shape\":[1,1024,24,24]"), std::string::npos) << out;
  EXPECT_NE(out.find("\"case\":\"atto-s1\",\"shape\":[8,40,64,64],\"pass\":\"infer dw+ln\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"case\":\"base-s4\",\"shape\":[1,1024,24,24],\"pass\":\"infer dw+ln bf16\""), std::string::npos)
      << out;
}

// ---- depthwise_layer_norm: the blocks' convolution and LayerNorm fused for inference ----------------------

// LayerNorm over the channels of the float64 depthwise convolution (ATen's float64 convolution, then the
// formula with the biased variance), as (B, H, W, C).
at::Tensor dwln_reference(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const at::Tensor& g,
                          const at::Tensor& be, double eps) {
  const at::Tensor y = reference(x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble)).permute({0, 2, 3, 1});
  const at::Tensor mean = y.mean(-1, true);
  const at::Tensor var = (y - mean).pow(2).mean(-1, true);
  return (y - mean) / (var + eps).sqrt() * g.to(at::kDouble) + be.to(at::kDouble);
}

TEST(DepthwiseLayerNorm, MatchesTheFloat64Formula) {
  torch::manual_seed(11);
  // Channel counts of every vector width (4, 8, 16 lanes and mixtures: 12, 40, 56, 80), maps smaller than
  // the kernel, widths that are not multiples of the register block, a single pixel.
  const Case cases[] = {{2, 40, 13, 37, 7}, {1, 64, 8, 8, 7},  {2, 80, 6, 5, 7},  {1, 4, 3, 4, 7},
                        {3, 12, 1, 1, 7},   {1, 56, 2, 19, 7}, {2, 16, 17, 9, 7}, {1, 320, 4, 4, 7}};
  for (const Case& c : cases) {
    const std::string name = case_name(c);
    const at::Tensor x = at::randn({c.B, c.C, c.H, c.W}).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor w = at::randn({c.C, 1, 7, 7}) * 0.2, b = at::randn({c.C});
    const at::Tensor g = at::randn({c.C}), be = at::randn({c.C});
    torch::NoGradGuard no_grad;
    const at::Tensor y = diffnet::ops::depthwise_layer_norm(x, w, b, g, be, 1e-6);
    ASSERT_EQ(y.sizes(), at::IntArrayRef({c.B, c.H, c.W, c.C})) << name;
    EXPECT_TRUE(y.is_contiguous()) << name;
    EXPECT_LT(rel_err(y, dwln_reference(x, w, b, g, be, 1e-6)), 2e-5) << name;
  }
  // bf16 storage (--precision bf16): the float64 formula on the same bf16 values, rounded once to bf16 at
  // the end (the arithmetic is float32): within a bf16 rounding of each value.
  for (const Case& c : {Case{2, 40, 13, 37, 7}, Case{1, 64, 8, 8, 7}, Case{1, 12, 3, 5, 7}}) {
    const auto bf = at::kBFloat16;
    const at::Tensor x = at::randn({c.B, c.C, c.H, c.W}).to(bf).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor w = (at::randn({c.C, 1, 7, 7}) * 0.2).to(bf), b = at::randn({c.C}).to(bf);
    const at::Tensor g = at::randn({c.C}).to(bf), be = at::randn({c.C}).to(bf);
    torch::NoGradGuard no_grad;
    const at::Tensor y = diffnet::ops::depthwise_layer_norm(x, w, b, g, be, 1e-6);
    ASSERT_EQ(y.scalar_type(), bf);
    const at::Tensor ref = dwln_reference(x, w, b, g, be, 1e-6);
    EXPECT_TRUE(((y.to(at::kDouble) - ref).abs() <= ref.abs() * (1.0 / 256) + 1e-4).all().item<bool>())
        << "C" << c.C << " max err " << (y.to(at::kDouble) - ref).abs().max().item<double>();
  }
  // eps matters where a pixel's channels are nearly equal: a constant input gives the bias alone, which
  // LayerNorm then scales by 1/sqrt(var + eps).
  const at::Tensor x = at::full({1, 8, 5, 6}, 0.5f).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor w = at::zeros({8, 1, 7, 7}), b = at::arange(8, at::kFloat) * 1e-3f;
  const at::Tensor g = at::ones({8}), be = at::zeros({8});
  torch::NoGradGuard no_grad;
  EXPECT_LT(rel_err(diffnet::ops::depthwise_layer_norm(x, w, b, g, be, 1e-5), dwln_reference(x, w, b, g, be, 1e-5)),
            1e-5);
}

TEST(DepthwiseLayerNorm, WhereItAppliesAndErrors) {
  using diffnet::ops::depthwise_layer_norm_applies;
  const auto cl = at::MemoryFormat::ChannelsLast;
  const at::Tensor x = at::randn({1, 8, 6, 6}).contiguous(cl), w = at::randn({8, 1, 7, 7}), b = at::randn({8});
  const diffnet::CpuIsa isa = diffnet::cpu_isa();  // the level in use: where the fusion was measured faster
  const at::Tensor x320 = at::randn({1, 320, 2, 2}).contiguous(cl), w320 = at::randn({320, 1, 7, 7});
  {
    torch::NoGradGuard no_grad;
    EXPECT_EQ(depthwise_layer_norm_applies(x, w, b), isa != diffnet::CpuIsa::kBase);
    EXPECT_EQ(depthwise_layer_norm_applies(x320, w320, at::randn({320})), isa == diffnet::CpuIsa::kAvx512);
    EXPECT_FALSE(depthwise_layer_norm_applies(x.contiguous(), w, b));                      // NCHW memory
    EXPECT_FALSE(depthwise_layer_norm_applies(x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble)));  // float64
    EXPECT_FALSE(depthwise_layer_norm_applies(x, w, at::Tensor()));                        // no bias
    EXPECT_FALSE(depthwise_layer_norm_applies(x, at::randn({8, 1, 5, 5}), b));             // K = 5
    EXPECT_THROW(diffnet::ops::depthwise_layer_norm(x, at::randn({8, 1, 5, 5}), b, at::ones({8}), at::zeros({8}), 1e-6),
                 diffnet::Error);
    const at::Tensor x6 = at::randn({1, 6, 6, 6}).contiguous(cl);                          // C not a multiple of 4
    EXPECT_FALSE(depthwise_layer_norm_applies(x6, at::randn({6, 1, 7, 7}), at::randn({6})));
    // 256 float32 channels (1 KB a pixel): the blocks keep LibTorch's path there at every level, though the
    // kernel computes it right; in bf16 the same count is 512 B a pixel and fused with AVX-512.
    const at::Tensor x256 = at::randn({1, 256, 3, 9}).contiguous(cl), w256 = at::randn({256, 1, 7, 7}) * 0.2;
    const at::Tensor b256 = at::randn({256}), g256 = at::randn({256}), be256 = at::randn({256});
    EXPECT_FALSE(depthwise_layer_norm_applies(x256, w256, b256));
    EXPECT_LT(rel_err(diffnet::ops::depthwise_layer_norm(x256, w256, b256, g256, be256, 1e-6),
                      dwln_reference(x256, w256, b256, g256, be256, 1e-6)),
              2e-5);
    const auto bf = at::kBFloat16;
    EXPECT_EQ(depthwise_layer_norm_applies(x256.to(bf), w256.to(bf), b256.to(bf)), isa == diffnet::CpuIsa::kAvx512);
    EXPECT_FALSE(depthwise_layer_norm_applies(x256.to(bf), w256, b256));  // weights of another dtype
    EXPECT_THROW(diffnet::ops::depthwise_layer_norm(x.contiguous(), w, b, at::ones({8}), at::zeros({8}), 1e-6),
                 diffnet::Error);
    EXPECT_THROW(diffnet::ops::depthwise_layer_norm(x, w, b, at::ones({4}), at::zeros({8}), 1e-6), diffnet::Error);
  }
  // Gradients recorded: not fused (training keeps the autograd path).
  EXPECT_FALSE(depthwise_layer_norm_applies(x.clone().requires_grad_(true), w, b));
}

}  // namespace
