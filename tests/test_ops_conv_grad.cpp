// The convolution whose weight gradient is a matrix product (include/diffnet/conv_grad.h) against LibTorch's
// convolution and its autograd in float64 (ATen's reference convolution, not oneDNN and not a product of
// gathered patches): 1x1 and K x K, several patch chunks per image with a shorter last one, both layouts,
// with and without bias, both weight gradients through autograd; the choice; inference unchanged; the
// argument checks.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>

#include "diffnet/common.h"
#include "diffnet/conv_grad.h"
#include "ops_test_util.h"

namespace {

using testutil::Grads;
using testutil::rel_err;
using testutil::run_grads;

struct Case {
  int64_t B, C, H, W, N, K;
};

std::string case_name(const Case& c) {
  return "B" + std::to_string(c.B) + " C" + std::to_string(c.C) + " " + std::to_string(c.H) + "x" +
         std::to_string(c.W) + " N" + std::to_string(c.N) + " K" + std::to_string(c.K);
}

const Case kCases[] = {{2, 5, 13, 7, 6, 3}, {1, 3, 4, 9, 8, 5}, {2, 16, 9, 11, 4, 1}, {3, 7, 5, 5, 33, 1},
                       {1, 6, 2, 3, 5, 3}};

// A case's float64 input, weight, bias and upstream gradient (or output weights), and the convolution.
struct Tensors {
  at::Tensor x, w, b, g;
};

Tensors random_tensors(const Case& c) {
  return {at::randn({c.B, c.C, c.H, c.W}, at::kDouble), at::randn({c.N, c.C, c.K, c.K}, at::kDouble),
          at::randn({c.N}, at::kDouble), at::randn({c.B, c.N, c.H, c.W}, at::kDouble)};
}

// The product alone: dweight and dbias against the float64 autograd of at::conv2d, for chunks of one
// row, of a few rows that do not divide H (a shorter last chunk), and of the whole image.
TEST(ConvGrad, WeightGradientMatchesFloat64Convolution) {
  torch::manual_seed(11);
  for (const Case& c : kCases) {
    const int64_t p = c.K / 2;
    const auto [x, w, b, g] = random_tensors(c);
    const Grads ref = run_grads([p](const at::Tensor& x_, const at::Tensor& w_, const at::Tensor& b_) {
      return at::conv2d(x_, w_, b_, {1, 1}, {p, p});
    }, x, w, b, g);
    for (const int64_t chunk : {int64_t{1}, 2 * c.W, int64_t{1} << 20})
      for (const bool cl : {true, false}) {
        const auto fmt = cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
        auto [dw, db] = diffnet::ops::conv_weight_grad_gemm(g.to(at::kFloat).contiguous(fmt),
                                                            x.to(at::kFloat).contiguous(fmt), c.K, p, chunk);
        const std::string name = case_name(c) + " chunk " + std::to_string(chunk) + (cl ? " channels_last" : " NCHW");
        ASSERT_EQ(dw.sizes(), w.sizes()) << name;
        EXPECT_LT(rel_err(dw, ref.dw), 2e-6) << name;
        EXPECT_LT(rel_err(db, ref.db), 2e-6) << name;
      }
  }
}

// Through autograd, whichever weight gradient the shape gets: output, input, weight and bias gradients
// against float64; without a bias; with an input that needs no gradient.
TEST(ConvGrad, AutogradMatchesFloat64Convolution) {
  const std::string before = diffnet::ops::conv_weight_grad();
  torch::manual_seed(12);
  for (const Case& c : kCases) {
    const int64_t p = c.K / 2;
    const auto [x, w, b, r] = random_tensors(c);
    auto conv64 = [p](const at::Tensor& x_, const at::Tensor& w_, const at::Tensor& b_) {
      return at::conv2d(x_, w_, b_, {1, 1}, {p, p});
    };
    auto ours = [p](const at::Tensor& x_, const at::Tensor& w_, const at::Tensor& b_) {
      return diffnet::ops::conv2d_gemm_grad(x_, w_, b_, p);
    };
    const Grads ref = run_grads(conv64, x, w, b, r);
    at::Tensor w64 = w.clone().requires_grad_(true);
    (at::conv2d(x, w64, at::Tensor(), {1, 1}, {p, p}) * r).sum().backward();
    const at::Tensor x32 = x.to(at::kFloat).contiguous(at::MemoryFormat::ChannelsLast);
    for (const bool product : {true, false}) {  // both weight gradients
      diffnet::ops::set_conv_weight_grad(product ? "ours" : "aten");
      const std::string name = case_name(c) + (product ? " product" : " libtorch");
      const Grads d = run_grads(ours, x32, w.to(at::kFloat), b.to(at::kFloat), r.to(at::kFloat));
      EXPECT_LT(rel_err(d.y, ref.y), 2e-6) << name;
      EXPECT_LT(rel_err(d.dx, ref.dx), 2e-6) << name;
      EXPECT_LT(rel_err(d.dw, ref.dw), 2e-6) << name;
      EXPECT_LT(rel_err(d.db, ref.db), 2e-6) << name;
      // No bias; the input a constant (its gradient is never asked for).
      at::Tensor w32 = w.to(at::kFloat).requires_grad_(true);
      at::Tensor y = diffnet::ops::conv2d_gemm_grad(x32, w32, at::Tensor(), p);
      (y * r.to(at::kFloat)).sum().backward();
      EXPECT_LT(rel_err(w32.grad(), w64.grad()), 2e-6) << name << " no bias";
    }
  }
  diffnet::ops::set_conv_weight_grad(before);
}

// The process-wide choice: measured (or $DIFFNET_CONV_WGRAD) on first use, set by name, measured again
// by "auto", a wrong name refused and nothing changed.
TEST(ConvGrad, ChoiceIsSetByNameOrMeasured) {
  const std::string before = diffnet::ops::conv_weight_grad();
  EXPECT_TRUE(before == "ours" || before == "aten") << before;
  for (const char* choice : {"aten", "ours"}) {
    diffnet::ops::set_conv_weight_grad(choice);
    EXPECT_EQ(diffnet::ops::conv_weight_grad(), choice);
  }
  EXPECT_THROW(diffnet::ops::set_conv_weight_grad("gemm"), diffnet::Error);
  EXPECT_EQ(diffnet::ops::conv_weight_grad(), "ours");
  diffnet::ops::set_conv_weight_grad("auto");
  const std::string measured = diffnet::ops::conv_weight_grad();
  EXPECT_TRUE(measured == "ours" || measured == "aten") << measured;
  diffnet::ops::set_conv_weight_grad(before);
}

// Without gradients (inference) it is at::conv2d, bit for bit; an input it does not take (stride or
// padding other than K / 2, float64) falls back to at::conv2d with its own autograd.
TEST(ConvGrad, InferenceAndFallbacksAreLibTorchs) {
  torch::manual_seed(13);
  at::Tensor x = at::randn({2, 8, 10, 9}).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor w = at::randn({6, 8, 3, 3}), b = at::randn({6});
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(at::equal(diffnet::ops::conv2d_gemm_grad(x, w, b, 1), at::conv2d(x, w, b, {1, 1}, {1, 1})));
  }
  at::Tensor wg = w.clone().requires_grad_(true);
  at::Tensor y = diffnet::ops::conv2d_gemm_grad(x, wg, b, 0);  // padding 0 with K = 3: LibTorch's
  EXPECT_EQ(y.size(2), 8);
  EXPECT_EQ(y.grad_fn()->name().find("ConvGemm"), std::string::npos) << y.grad_fn()->name();
  EXPECT_FALSE(diffnet::ops::conv_gemm_grad_applies(x, wg, 0));
  EXPECT_TRUE(diffnet::ops::conv_gemm_grad_applies(x, wg, 1));
  EXPECT_FALSE(diffnet::ops::conv_gemm_grad_applies(x.to(at::kDouble), wg.to(at::kDouble), 1));
  at::Tensor y1 = diffnet::ops::conv2d_gemm_grad(x, wg, b, 1);
  EXPECT_NE(y1.grad_fn()->name().find("ConvGemm"), std::string::npos) << y1.grad_fn()->name();
}

TEST(ConvGrad, ArgumentChecks) {
  at::Tensor x = at::randn({1, 3, 5, 5}), g = at::randn({1, 4, 5, 5});
  EXPECT_THROW(diffnet::ops::conv_weight_grad_gemm(g, x, 3, 0), diffnet::Error);  // padding not K / 2
  EXPECT_THROW(diffnet::ops::conv_weight_grad_gemm(g, x, 2, 0), diffnet::Error);  // even K
  EXPECT_THROW(diffnet::ops::conv_weight_grad_gemm(at::randn({1, 4, 5, 4}), x, 1, 0), diffnet::Error);
  EXPECT_THROW(diffnet::ops::conv_weight_grad_gemm(g.to(at::kDouble), x.to(at::kDouble), 1, 0), diffnet::Error);
  EXPECT_THROW(diffnet::ops::conv_weight_grad_gemm(g[0], x[0], 1, 0), diffnet::Error);
}

TEST(ConvGrad, BenchPrintsEveryCase) {
  testing::internal::CaptureStdout();
  EXPECT_EQ(diffnet::ops::run_conv_grad_bench(1, true), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  const auto lines = testutil::bench_json_lines(out, "{\"case\"", {"libtorch_ms", "ours_ms", "speedup"});
  ASSERT_EQ(lines.size(), 11u) << out;
  for (const auto& l : lines) {
    EXPECT_GT(l.num.at("libtorch_ms"), 0) << l.text;
    EXPECT_GT(l.num.at("ours_ms"), 0) << l.text;
  }
}

}  // namespace
