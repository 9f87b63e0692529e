// The depthwise convolution with our CPU backward (include/diffnet/depthwise.h) against LibTorch's own
// convolution and its autograd in float64 (a different code path: ATen's reference convolution), for
// several kernel sizes, channel counts that are and are not multiples of the kernels' register chunk,
// pages smaller than the kernel, both layouts; plus the fallbacks and the argument checks.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <string>

#include "diffnet/common.h"
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

TEST(Depthwise, BackwardMatchesLibTorchInFloat64AndFloat32) {
  torch::manual_seed(7);
  const Case cases[] = {{2, 40, 13, 11, 7}, {1, 16, 8, 9, 7}, {2, 37, 7, 20, 7}, {1, 5, 3, 4, 7},
                        {3, 33, 6, 5, 3},   {1, 18, 10, 6, 5}, {2, 17, 4, 12, 9}, {1, 8, 5, 5, 1}};
  for (const Case& c : cases) {
    const std::string name = "B" + std::to_string(c.B) + " C" + std::to_string(c.C) + " " + std::to_string(c.H) +
                             "x" + std::to_string(c.W) + " K" + std::to_string(c.K);
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

// `diffnet bench --op depthwise --json`: one object per case, both timings positive, the ratio theirs.
TEST(Depthwise, BenchPrintsEveryCase) {
  testing::internal::CaptureStdout();
  EXPECT_EQ(diffnet::ops::run_depthwise_bench(1, true), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(testutil::expect_bench_lines(out, "{\"case\":", "libtorch_ms", "ours_ms"), 8u) << out;
  EXPECT_NE(out.find("\"case\":\"base-s4\",\"shape\":[1,1024,24,24]"), std::string::npos) << out;
}

}  // namespace
