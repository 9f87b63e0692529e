// The embedding op (include/diffnet/embedding.h): its forward is at::embedding's exactly; its weight
// gradient against a dense float64 computation (one-hot(indices)^T · grad as a matrix product, another
// code path), in float64 and float32, for tables and lookup counts below and above one block of lookups;
// the same bits for 1 and 2 threads; the fallbacks.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "diffnet/common.h"
#include "diffnet/embedding.h"
#include "ops_test_util.h"

namespace {

namespace dops = diffnet::ops;
using testutil::rel_err;

// d(sum(embedding(w, idx) * r)) / dw through the op, and the dense reference.
at::Tensor op_grad(const at::Tensor& w0, const at::Tensor& idx, const at::Tensor& r) {
  at::Tensor w = w0.detach().clone().requires_grad_(true);
  at::Tensor y = dops::embedding(w, idx);
  (y * r).sum().backward();
  return w.grad();
}
at::Tensor dense_grad(int64_t V, const at::Tensor& idx, const at::Tensor& r) {
  const int64_t D = r.size(-1);
  at::Tensor onehot = at::one_hot(idx.reshape({-1}), V).to(at::kDouble);  // (N, V)
  return onehot.t().matmul(r.reshape({-1, D}).to(at::kDouble));          // (V, D)
}

TEST(Embedding, ForwardIsExactAndGradientMatchesDenseFloat64) {
  torch::manual_seed(5);
  struct Case {
    int64_t V, D;
    std::vector<int64_t> shape;
  };
  // The DCT branch's shape (B, h, w, 64) at small and larger pages; a 1-D lookup; a table of one row.
  const Case cases[] = {{21, 4, {2, 3, 5, 64}}, {21, 1, {2, 16, 16, 64}}, {256, 8, {3, 64}}, {7, 3, {100000}}, {1, 2, {9}}};
  for (const Case& c : cases) {
    at::Tensor idx = at::randint(0, c.V, c.shape, at::kLong);
    std::vector<int64_t> out_shape = c.shape;
    out_shape.push_back(c.D);
    for (auto dt : {at::kDouble, at::kFloat}) {
      at::Tensor w = at::randn({c.V, c.D}, dt);
      ASSERT_TRUE(diffnet::ops::embedding_uses_own_backward(w, idx));
      EXPECT_TRUE(at::equal(dops::embedding(w, idx), at::embedding(w, idx)));
      at::Tensor r = at::randn(out_shape, dt);
      at::Tensor g = op_grad(w, idx, r);
      EXPECT_EQ(g.scalar_type(), dt);
      EXPECT_LT(rel_err(g, dense_grad(c.V, idx, r)), dt == at::kDouble ? 1e-13 : 1e-6)
          << "V " << c.V << " D " << c.D << " N " << idx.numel();
    }
  }
}

TEST(Embedding, SameBitsForAnyThreadCountAndNonContiguousGradients) {
  torch::manual_seed(6);
  at::Tensor idx = at::randint(0, 21, {2, 32, 32, 64}, at::kLong);  // 131,072 lookups: 16 blocks
  at::Tensor w = at::randn({21, 4});
  // A gradient that reaches the op through a permute (not contiguous) must give the same result.
  at::Tensor r = at::randn({2, 32, 32, 4, 64}).permute({0, 1, 2, 4, 3});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  at::Tensor g1 = op_grad(w, idx, r);
  at::set_num_threads(2);
  at::Tensor g2 = op_grad(w, idx, r);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(g1, g2));
  EXPECT_LT(rel_err(g1, dense_grad(21, idx, r)), 1e-6);
}

TEST(Embedding, FallbacksAndErrors) {
  at::Tensor idx = at::randint(0, 5, {10}, at::kLong);
  // int32 indices, a large table, bf16: LibTorch's own path (same values, its gradient).
  EXPECT_FALSE(diffnet::ops::embedding_uses_own_backward(at::randn({5, 3}), idx.to(at::kInt)));
  EXPECT_FALSE(diffnet::ops::embedding_uses_own_backward(at::randn({70000, 1}), idx));
  EXPECT_FALSE(diffnet::ops::embedding_uses_own_backward(at::randn({5, 3}).to(at::kBFloat16), idx));
  at::Tensor w = at::randn({5, 3});
  at::Tensor r = at::randn({10, 3});
  EXPECT_LT(rel_err(op_grad(w, idx.to(at::kInt), r), dense_grad(5, idx, r)), 1e-6);
  // Out-of-range indices and a weight that is not a table are errors, not reads out of bounds.
  EXPECT_ANY_THROW(dops::embedding(w.clone().requires_grad_(true), at::full({3}, 5, at::kLong)));
  EXPECT_THROW(dops::embedding(at::randn({5}), idx), diffnet::Error);
}

}  // namespace
