// The fused GRN (include/diffnet/grn.h) against the composite formula run by LibTorch's operators and
// autograd in float64 (an independent code path: ATen reductions and autograd's derivative formulas),
// for channel counts that are and are not multiples of a vector register, pages smaller and larger than
// one block of positions, several images; plus thread-count invariance, an all-zero channel, the
// fallbacks, the argument checks and the benchmark's output. The same for GELU + GRN against GELU written
// with LibTorch's erf in float64, and the float32 GELU alone against float64 erf and exp.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "diffnet/common.h"
#include "diffnet/grn.h"
#include "ops/env_switch.h"
#include "ops/grn/cpu/gelu_math.h"
#include "ops/grn/cpu/grn_kernel.h"
#include "ops_test_util.h"

namespace {

using testutil::Grads;
using testutil::rel_err;
using testutil::run_grads;

using diffnet::ops::grn;
using diffnet::ops::grn_composite;

TEST(Grn, MatchesTheCompositeInFloat64AndFloat32) {
  torch::manual_seed(11);
  struct Case {
    int64_t B, H, W, C;
  };
  const Case cases[] = {{2, 5, 7, 13}, {1, 1, 1, 4}, {3, 8, 9, 40}, {1, 16, 17, 160}, {2, 3, 30, 9}};
  for (const Case& c : cases) {
    const std::string name = "B" + std::to_string(c.B) + " " + std::to_string(c.H) + "x" + std::to_string(c.W) +
                             " C" + std::to_string(c.C);
    // GELU-like inputs (mostly positive, some small negatives), the weights of a trained model's scale.
    at::Tensor x = at::gelu(at::randn({c.B, c.H, c.W, c.C}, at::kDouble) * 2);
    at::Tensor w = at::randn({c.C}, at::kDouble) * 0.5, b = at::randn({c.C}, at::kDouble) * 0.1;
    at::Tensor r = at::randn({c.B, c.H, c.W, c.C}, at::kDouble);
    ASSERT_TRUE(diffnet::ops::grn_uses_own_kernel(x, w, b)) << name;
    const Grads ref = run_grads(grn_composite, x, w, b, r);
    const Grads d64 = run_grads(grn, x, w, b, r);
    EXPECT_LT(rel_err(d64.y, ref.y), 1e-13) << name;
    EXPECT_LT(rel_err(d64.dx, ref.dx), 1e-12) << name;
    EXPECT_LT(rel_err(d64.dw, ref.dw), 1e-12) << name;
    EXPECT_LT(rel_err(d64.db, ref.db), 1e-12) << name;
    const Grads d32 = run_grads(grn, x.to(at::kFloat), w.to(at::kFloat), b.to(at::kFloat), r.to(at::kFloat));
    EXPECT_LT(rel_err(d32.y, ref.y), 2e-6) << name;
    EXPECT_LT(rel_err(d32.dx, ref.dx), 2e-5) << name;
    EXPECT_LT(rel_err(d32.dw, ref.dw), 2e-5) << name;
    EXPECT_LT(rel_err(d32.db, ref.db), 2e-5) << name;
    // Inference (no autograd) runs the same forward: the same bits.
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(at::equal(grn(x.to(at::kFloat), w.to(at::kFloat), b.to(at::kFloat)), d32.y)) << name;
  }
}

// A non-contiguous input (a permuted view) is read correctly and its gradient has the input's shape.
TEST(Grn, NonContiguousInput) {
  torch::manual_seed(12);
  at::Tensor nchw = at::randn({2, 24, 6, 7}, at::kDouble);
  at::Tensor x = nchw.permute({0, 2, 3, 1});  // (B, H, W, C) view, not contiguous
  ASSERT_FALSE(x.is_contiguous());
  at::Tensor w = at::randn({24}, at::kDouble), b = at::randn({24}, at::kDouble);
  at::Tensor r = at::randn({2, 6, 7, 24}, at::kDouble);
  const Grads ref = run_grads(grn_composite, x, w, b, r);
  const Grads d = run_grads(grn, x, w, b, r);
  EXPECT_LT(rel_err(d.y, ref.y), 1e-13);
  EXPECT_LT(rel_err(d.dx, ref.dx), 1e-12);
  EXPECT_EQ(d.dx.sizes(), x.sizes());
}

// GRN and GELU + GRN alike.
TEST(Grn, SameBitsForAnyThreadCount) {
  torch::manual_seed(13);
  at::Tensor x = at::randn({2, 33, 29, 160}) * 2, w = at::randn({160}), b = at::randn({160});
  at::Tensor r = at::randn({2, 33, 29, 160});
  const int threads = at::get_num_threads();
  for (const auto op : {&grn, &diffnet::ops::gelu_grn}) {
    at::set_num_threads(1);
    const Grads one = run_grads(op, x, w, b, r);
    at::set_num_threads(std::max(2, threads));
    const Grads two = run_grads(op, x, w, b, r);
    at::set_num_threads(threads);
    EXPECT_TRUE(at::equal(one.y, two.y));
    EXPECT_TRUE(at::equal(one.dx, two.dx));
    EXPECT_TRUE(at::equal(one.dw, two.dw));
    EXPECT_TRUE(at::equal(one.db, two.db));
  }
}

// A channel that is zero everywhere in an image: gx = nx = 0 there, so y = bias and the input gradient
// of that channel is the upstream gradient itself (1 + w * 0); the composite's sqrt makes it NaN.
TEST(Grn, AllZeroChannelHasAFiniteGradient) {
  torch::manual_seed(14);
  at::Tensor x = at::randn({1, 4, 5, 8}, at::kDouble);
  x.select(3, 2).zero_();
  at::Tensor w = at::randn({8}, at::kDouble), b = at::randn({8}, at::kDouble), r = at::randn({1, 4, 5, 8}, at::kDouble);
  const Grads d = run_grads(grn, x, w, b, r);
  EXPECT_TRUE(at::isfinite(d.dx).all().item<bool>());
  EXPECT_TRUE(at::allclose(d.y.select(3, 2), b[2].expand({1, 4, 5}), 0, 1e-15));
  EXPECT_TRUE(at::allclose(d.dx.select(3, 2), r.select(3, 2), 0, 1e-15));
  // The other channels still match the composite.
  const Grads ref = run_grads(grn_composite, x, w, b, r);
  at::Tensor keep = at::ones({8}, at::kBool);
  keep[2] = false;
  EXPECT_LT(rel_err(d.dx.index({"...", keep}), ref.dx.index({"...", keep})), 1e-12);
}

// bf16 with gradient, mixed dtypes and frozen inputs take the composite (or skip gradients not asked for).
TEST(Grn, FallbacksAndGradientsNotAskedFor) {
  torch::manual_seed(15);
  at::Tensor x = at::randn({1, 6, 6, 16}), w = at::randn({16}), b = at::randn({16});
  at::Tensor xb = x.to(at::kBFloat16);
  at::Tensor wt = w.clone().requires_grad_(true);
  EXPECT_FALSE(diffnet::ops::grn_uses_own_kernel(xb, wt, b));
  EXPECT_FALSE(diffnet::ops::grn_uses_own_kernel(xb, w.to(at::kDouble), b.to(at::kDouble)));
  EXPECT_FALSE(diffnet::ops::grn_uses_own_kernel(x, w.to(at::kDouble), b));
  at::Tensor yb = grn(xb, wt, b);
  EXPECT_EQ(yb.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(yb, grn_composite(xb, wt, b)));
  // Only the weights train (a frozen input): their gradients match the composite's.
  at::Tensor wg = w.clone().requires_grad_(true), bg = b.clone().requires_grad_(true);
  grn(x, wg, bg).square().sum().backward();
  at::Tensor wr = w.clone().requires_grad_(true), br = b.clone().requires_grad_(true);
  grn_composite(x, wr, br).square().sum().backward();
  EXPECT_LT(rel_err(wg.grad(), wr.grad()), 1e-5);
  EXPECT_LT(rel_err(bg.grad(), br.grad()), 1e-5);
}

TEST(Grn, ArgumentErrors) {
  at::Tensor x = at::randn({1, 4, 4, 8});
  try {
    grn(x, at::randn({7}), at::randn({8}));
    FAIL() << "7 weights for 8 channels accepted";
  } catch (const diffnet::Error& e) {
    EXPECT_NE(std::string(e.what()).find("grn: weight and bias must have C = 8 values"), std::string::npos) << e.what();
  }
  EXPECT_THROW(grn(at::randn({4, 4, 8}), at::randn({8}), at::randn({8})), diffnet::Error);
}

// $DIFFNET_GRN / $DIFFNET_DEPTHWISE: unset, empty or "ours" keep our kernels, "aten" LibTorch's, anything
// else is an error naming the variable.
TEST(Grn, EnvSwitchValues) {
  const char* name = "DIFFNET_TEST_SWITCH";
  unsetenv(name);
  EXPECT_FALSE(diffnet::ops::env_says_aten(name));
  setenv(name, "", 1);
  EXPECT_FALSE(diffnet::ops::env_says_aten(name));
  setenv(name, "ours", 1);
  EXPECT_FALSE(diffnet::ops::env_says_aten(name));
  setenv(name, "aten", 1);
  EXPECT_TRUE(diffnet::ops::env_says_aten(name));
  setenv(name, "fast", 1);
  try {
    diffnet::ops::env_says_aten(name);
    FAIL() << "'fast' accepted";
  } catch (const diffnet::Error& e) {
    EXPECT_EQ(std::string(e.what()), "DIFFNET_TEST_SWITCH: 'fast' is not aten or ours");
  }
  unsetenv(name);
}

// `diffnet bench --op grn --json`: two passes per case and op, both timings positive, the ratio theirs.
TEST(Grn, BenchPrintsEveryCase) {
  testing::internal::CaptureStdout();
  EXPECT_EQ(diffnet::ops::run_grn_bench(1, true), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(testutil::expect_bench_lines(out, "{\"op\":\"grn\"", "composite_ms", "fused_ms"), 16u) << out;
  EXPECT_EQ(testutil::expect_bench_lines(out, "{\"op\":\"gelu_grn\"", "separate_ms", "fused_ms"), 16u) << out;
  EXPECT_NE(out.find("\"case\":\"base-s4\",\"shape\":[1,24,24,4096],\"pass\":\"fwd+bwd\""), std::string::npos) << out;
}

// ---- GELU + GRN ----------------------------------------------------------------------------------

// The reference: GELU as 0.5 h (1 + erf(h / sqrt 2)) written out with LibTorch's erf (not at::gelu) in
// float64, then the composite GRN; autograd differentiates both.
at::Tensor gelu_grn_reference(const at::Tensor& h, const at::Tensor& w, const at::Tensor& b) {
  return grn_composite(testutil::gelu_erf_reference(h), w, b);
}

// Pre-activations of a trained MLP's scale: mostly within +-4, some beyond (where erf saturates), some
// exactly 0; channel counts that are and are not multiples of a vector register.
TEST(GeluGrn, MatchesTheFloat64ReferenceInFloat64AndFloat32) {
  torch::manual_seed(21);
  struct Case {
    int64_t B, H, W, C;
  };
  const Case cases[] = {{2, 5, 7, 13}, {1, 1, 1, 4}, {3, 8, 9, 40}, {1, 16, 17, 160}};
  for (const Case& c : cases) {
    const std::string name = "B" + std::to_string(c.B) + " " + std::to_string(c.H) + "x" + std::to_string(c.W) +
                             " C" + std::to_string(c.C);
    at::Tensor h = at::randn({c.B, c.H, c.W, c.C}, at::kDouble) * 2.5;
    if (c.H * c.W > 1) {  // (with one position a channel of gelu(h) = 0 has no gradient through the reference's sqrt)
      h.view(-1)[0] = 0.0;
      h.view(-1)[1] = -9.0;
      h.view(-1)[2] = 12.0;
    }
    at::Tensor w = at::randn({c.C}, at::kDouble) * 0.5, b = at::randn({c.C}, at::kDouble) * 0.1;
    at::Tensor r = at::randn({c.B, c.H, c.W, c.C}, at::kDouble);
    ASSERT_TRUE(diffnet::ops::gelu_grn_uses_own_kernel(h, w, b)) << name;
    const Grads ref = run_grads(gelu_grn_reference, h, w, b, r);
    const Grads d64 = run_grads(diffnet::ops::gelu_grn, h, w, b, r);
    EXPECT_LT(rel_err(d64.y, ref.y), 1e-13) << name;
    EXPECT_LT(rel_err(d64.dx, ref.dx), 1e-12) << name;
    EXPECT_LT(rel_err(d64.dw, ref.dw), 1e-12) << name;
    EXPECT_LT(rel_err(d64.db, ref.db), 1e-12) << name;
    const Grads d32 = run_grads(diffnet::ops::gelu_grn, h.to(at::kFloat), w.to(at::kFloat), b.to(at::kFloat),
                                r.to(at::kFloat));
    EXPECT_LT(rel_err(d32.y, ref.y), 2e-6) << name;
    EXPECT_LT(rel_err(d32.dx, ref.dx), 2e-5) << name;
    EXPECT_LT(rel_err(d32.dw, ref.dw), 2e-5) << name;
    EXPECT_LT(rel_err(d32.db, ref.db), 2e-5) << name;
    // Element by element the float32 output is within the erf approximation's error of the reference.
    EXPECT_LT((d32.y.to(at::kDouble) - ref.y).abs().max().item<double>(), 1e-5) << name;
    // Inference (no gradient) writes its output over its own GELU buffer: the same bits, the input untouched.
    torch::NoGradGuard no_grad;
    const at::Tensor h32 = h.to(at::kFloat), h32_copy = h32.clone();
    EXPECT_TRUE(at::equal(diffnet::ops::gelu_grn(h32, w.to(at::kFloat), b.to(at::kFloat)), d32.y)) << name;
    EXPECT_TRUE(at::equal(h32, h32_copy)) << name;
  }
}

// The float32 GELU and its derivative alone, over a dense sweep of inputs, against float64 erf/exp:
// absolute error within 1e-6 (A&S 7.1.26: 1.5e-7 on erf, times |h|), and the tails exact (0 below -10
// where Phi underflows to 0 in float, h above +10).
TEST(GeluGrn, Float32GeluAgainstFloat64) {
  double worst_value = 0, worst_derivative = 0;
  for (int i = -200000; i <= 200000; ++i) {
    const float h = static_cast<float>(i) * 1e-4f;
    const double hd = h;
    const double value = 0.5 * hd * (1.0 + std::erf(hd * M_SQRT1_2));
    const double derivative =
        0.5 * (1.0 + std::erf(hd * M_SQRT1_2)) + hd * std::exp(-0.5 * hd * hd) / std::sqrt(2 * M_PI);
    worst_value = std::max(worst_value, std::abs(diffnet::ops::cpu::gelu_value(h) - value));
    worst_derivative = std::max(worst_derivative, std::abs(diffnet::ops::cpu::gelu_derivative(h) - derivative));
  }
  EXPECT_LT(worst_value, 1e-6);
  EXPECT_LT(worst_derivative, 1e-6);
  EXPECT_EQ(diffnet::ops::cpu::gelu_value(100.0f), 100.0f);
  EXPECT_EQ(diffnet::ops::cpu::gelu_derivative(100.0f), 1.0f);
  EXPECT_LT(std::abs(diffnet::ops::cpu::gelu_value(-100.0f)), 1e-30f);
  EXPECT_LT(std::abs(diffnet::ops::cpu::gelu_derivative(-100.0f)), 1e-30f);
  EXPECT_EQ(diffnet::ops::cpu::gelu_value(0.0f), 0.0f);
  EXPECT_NEAR(diffnet::ops::cpu::gelu_derivative(0.0f), 0.5f, 1e-7f);
}

// bf16 activations with gradient take at::gelu and the composite; a non-contiguous input is read correctly.
TEST(GeluGrn, FallbackAndNonContiguousInput) {
  torch::manual_seed(23);
  at::Tensor h = at::randn({1, 6, 6, 16}), w = at::randn({16}), b = at::randn({16});
  at::Tensor hb = h.to(at::kBFloat16), bt = b.clone().requires_grad_(true);
  EXPECT_FALSE(diffnet::ops::gelu_grn_uses_own_kernel(hb, w, bt));
  EXPECT_TRUE(at::equal(diffnet::ops::gelu_grn(hb, w, bt), grn_composite(at::gelu(hb), w, bt)));
  at::Tensor nchw = at::randn({2, 24, 6, 7}, at::kDouble);
  at::Tensor x = nchw.permute({0, 2, 3, 1});
  ASSERT_FALSE(x.is_contiguous());
  at::Tensor wd = at::randn({24}, at::kDouble), bd = at::randn({24}, at::kDouble);
  at::Tensor r = at::randn({2, 6, 7, 24}, at::kDouble);
  const Grads ref = run_grads(gelu_grn_reference, x, wd, bd, r);
  const Grads d = run_grads(diffnet::ops::gelu_grn, x, wd, bd, r);
  EXPECT_LT(rel_err(d.y, ref.y), 1e-13);
  EXPECT_LT(rel_err(d.dx, ref.dx), 1e-12);
  EXPECT_EQ(d.dx.sizes(), x.sizes());
}

// The bf16 storage helpers round as LibTorch does (to nearest, ties to even; infinities, overflow to
// infinity, subnormals) and load exactly: bit for bit against at::Tensor::to(kBFloat16); NaN stays NaN.
TEST(GrnBf16, StorageRoundsAsLibTorch) {
  using diffnet::ops::cpu::Bf16;
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.5f, 1.00390625f, 1.01171875f, 1.0078125f, 3.3e38f, 3.4e38f,
                          INFINITY, -INFINITY, NAN, 1e-40f, -1e-39f, 65504.0f, 0.1f};
  at::Tensor r = at::randn({4000}) * 1000;
  for (int64_t i = 0; i < r.numel(); ++i) v.push_back(r[i].item<float>());
  const at::Tensor t = at::from_blob(v.data(), {static_cast<int64_t>(v.size())}, at::kFloat).to(at::kBFloat16);
  const auto* want = static_cast<const uint16_t*>(t.data_ptr());
  for (size_t i = 0; i < v.size(); ++i) {
    Bf16 b{};
    diffnet::ops::cpu::store(b, v[i]);
    const float back = diffnet::ops::cpu::load(b);
    if (std::isnan(v[i])) {  // any NaN (LibTorch's vectorised conversion writes 0xFFFF, its scalar one 0x7FC0)
      EXPECT_TRUE(std::isnan(back));
      continue;
    }
    ASSERT_EQ(b.bits, want[i]) << "value " << v[i];
    EXPECT_EQ(back, t[static_cast<int64_t>(i)].item<float>());
  }
}

// bf16 inference (no gradient): the fused passes run on bf16 storage with float arithmetic. Against the
// float64 formula on the same bf16 values, the error is that of rounding g = gelu(h) and y to bf16 (each a
// relative 2^-8), for bf16 or float32 weights, channel counts on and off a vector register, blocks of
// positions split and not.
TEST(GrnBf16, InferenceMatchesFloat64OnTheSameValues) {
  torch::manual_seed(31);
  struct Case {
    int64_t B, H, W, C;
  };
  for (const Case& c : {Case{2, 5, 7, 13}, Case{1, 16, 17, 160}, Case{3, 9, 9, 40}}) {
    for (bool gelu : {false, true})
      for (at::ScalarType wt : {at::kBFloat16, at::kFloat}) {
        const std::string name = std::to_string(c.C) + (gelu ? " gelu_grn" : " grn") +
                                 (wt == at::kFloat ? " float weights" : " bf16 weights");
        const at::Tensor x = at::randn({c.B, c.H, c.W, c.C}).to(at::kBFloat16);
        const at::Tensor w = at::randn({c.C}).to(wt), b = at::randn({c.C}).to(wt);
        ASSERT_TRUE(diffnet::ops::grn_uses_own_kernel(x, w, b)) << name;
        const at::Tensor y = gelu ? diffnet::ops::gelu_grn(x, w, b) : grn(x, w, b);
        ASSERT_EQ(y.scalar_type(), at::kBFloat16) << name;
        const at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble), bd = b.to(at::kDouble);
        const at::Tensor ref = gelu ? gelu_grn_reference(xd, wd, bd) : grn_composite(xd, wd, bd);
        const at::Tensor err = (y.to(at::kDouble) - ref).abs();
        // Per element y = g a + bias: g's rounding (2^-8 of |g a| <= |y| + |bias|; bf16 keeps 8 significant
        // bits) and y's (2^-8 of |y|), plus the statistics' share of g's rounding.
        const at::Tensor bound = (ref.abs() + bd.abs()) * (3.0 / 256) + 1e-3 * ref.abs().max();
        EXPECT_TRUE((err <= bound).all().item<bool>()) << name << " max err " << err.max().item<double>();
        // And not merely within the bound by luck: the float32 path on the same values agrees as closely.
        const at::Tensor yf = gelu ? diffnet::ops::gelu_grn(x.to(at::kFloat), w.to(at::kFloat), b.to(at::kFloat))
                                   : grn(x.to(at::kFloat), w.to(at::kFloat), b.to(at::kFloat));
        EXPECT_LT(rel_err(y.to(at::kFloat), yf), 6e-3) << name;
      }
  }
}

}  // namespace
