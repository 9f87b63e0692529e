// The standalone GELU (include/diffnet/gelu.h) against GELU written with LibTorch's erf and exp in float64
// (an independent code path), its gradient against the derivative formula in float64, layouts (channels_
// last kept, a strided view read correctly), more values than one parallel chunk, bf16 inference and the
// fallbacks.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <cmath>

#include "diffnet/gelu.h"
#include "ops_test_util.h"

namespace {

namespace ops = diffnet::ops;
using diffnet::ops::gelu_uses_own_kernel;

at::Tensor reference(const at::Tensor& h) { return testutil::gelu_erf_reference(h.to(at::kDouble)); }

at::Tensor reference_derivative(const at::Tensor& h) {
  const at::Tensor x = h.to(at::kDouble);
  return 0.5 * (1.0 + at::erf(x * M_SQRT1_2)) + x * at::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

// Inputs of every scale, with the tails and zero; 70,000 values (several chunks of the parallel pass).
at::Tensor inputs(at::ScalarType dt) {
  torch::manual_seed(41);
  at::Tensor h = at::randn({7, 10, 10, 100}, at::kDouble) * 3.0;
  h.view(-1)[0] = 0.0;
  h.view(-1)[1] = -12.0;
  h.view(-1)[2] = 15.0;
  h.view(-1)[3] = -1e-20;
  return h.to(dt);
}

TEST(Gelu, ValuesAndGradientAgainstFloat64) {
  for (const auto dt : {at::kDouble, at::kFloat}) {
    const at::Tensor h0 = inputs(dt);
    ASSERT_TRUE(gelu_uses_own_kernel(h0));
    const at::Tensor r = at::randn(h0.sizes(), at::kDouble).to(dt);
    at::Tensor h = h0.clone().requires_grad_(true);
    at::Tensor y = ops::gelu(h);
    (y * r).sum().backward();
    const at::Tensor ref = reference(h0), dref = reference_derivative(h0) * r.to(at::kDouble);
    // float64: std::erf against ATen's erf; float32: A&S erf (1.5e-7) times |h|, plus rounding.
    const double tol = dt == at::kDouble ? 1e-15 : 4e-7;
    const at::Tensor scale = h0.to(at::kDouble).abs().clamp_min(1.0);
    EXPECT_LT(((y.detach().to(at::kDouble) - ref).abs() / scale).max().item<double>(), tol) << dt;
    EXPECT_LT(((h.grad().to(at::kDouble) - dref).abs() / r.to(at::kDouble).abs().clamp_min(1.0)).max().item<double>(),
              dt == at::kDouble ? 1e-14 : 1e-6)
        << dt;
    EXPECT_EQ(y.scalar_type(), dt);
    // Without autograd the same forward: the same bits.
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(at::equal(ops::gelu(h0), y.detach())) << dt;
  }
}

TEST(Gelu, ChannelsLastKeptAndStridedViewsRead) {
  const at::Tensor h = inputs(at::kFloat).permute({0, 3, 1, 2});  // (7, 100, 10, 10) channels_last storage
  ASSERT_TRUE(h.is_contiguous(at::MemoryFormat::ChannelsLast));
  const at::Tensor y = ops::gelu(h);
  EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_EQ(y.strides(), h.strides());
  EXPECT_TRUE(at::equal(y, ops::gelu(h.contiguous())));
  // A view that skips values: read through its strides, the result contiguous.
  const at::Tensor v = h.slice(1, 0, 100, 3);
  ASSERT_FALSE(v.is_non_overlapping_and_dense());
  const at::Tensor yv = ops::gelu(v);
  EXPECT_EQ(yv.sizes(), v.sizes());
  EXPECT_TRUE(at::equal(yv, ops::gelu(v.contiguous())));
  EXPECT_LT((yv.to(at::kDouble) - reference(v)).abs().max().item<double>(), 4e-6);
  // The gradient of a channels_last input, with an upstream gradient of another layout.
  at::Tensor hg = h.clone().requires_grad_(true);
  const at::Tensor r = at::randn(h.sizes());  // contiguous NCHW
  (ops::gelu(hg) * r).sum().backward();
  EXPECT_LT((hg.grad().to(at::kDouble) - reference_derivative(h) * r.to(at::kDouble)).abs().max().item<double>(), 1e-5);
}

// bf16 without gradient: our pass in float32 on the bf16 values, rounded once: within one bf16 rounding
// of the float64 value of the same inputs. With gradient: at::gelu.
TEST(Gelu, Bf16InferenceAndFallbacks) {
  const at::Tensor hb = inputs(at::kFloat).to(at::kBFloat16);
  ASSERT_TRUE(gelu_uses_own_kernel(hb));
  const at::Tensor y = ops::gelu(hb);
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  const at::Tensor ref = reference(hb);
  // bf16 keeps 8 significant bits: one rounding to nearest is at most 2^-8 relative, plus the float32 GELU's error.
  EXPECT_LT(((y.to(at::kDouble) - ref).abs() - ref.abs() / 256).max().item<double>(), 1e-6);
  const at::Tensor hg = hb.clone().requires_grad_(true);
  EXPECT_FALSE(gelu_uses_own_kernel(hg));
  EXPECT_TRUE(at::equal(ops::gelu(hg).detach(), at::gelu(hb)));
}

}  // namespace
