// Tests of the zero-sum discrepancy operator (docs/ops.md): the dense reference against an independent float64
// loop, the fused op against the dense reference and finite differences (float64, all K x M, both
// families, odd/non-square/tiny maps, batch > 1, channels_last and strided inputs), determinism, the
// implementation rule, the registered op under autocast, errors, the benchmark's output, and the same checks
// on CUDA when present.
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "diffnet/common.h"
#include "diffnet/zero_sum.h"
#include "diffnet/zero_sum_bench.h"
#include "test_ops_checks.h"
#include "testing.h"

using namespace diffnet;
using opstest::Case;

namespace {

// Reflection written independently of the library (repeated mirroring until inside [0, n)).
int64_t mirror(int64_t i, int64_t n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) {
    if (i < 0) i = -i;
    if (i >= n) i = 2 * (n - 1) - i;
  }
  return i;
}

// The operator's formula as a plain float64 loop (docs/design.md §2.4): a = theta or |theta|, s = sum a,
// u = sum_{d != 0} a_d x~(p+d) - s x(p), T = sum_m w_m act(u_m) + b.
at::Tensor loop_reference(const at::Tensor& x_in, const at::Tensor& theta_in, const at::Tensor& w_in,
                          const at::Tensor& b_in, int64_t n_free, const std::string& act) {
  at::Tensor x = x_in.to(at::kDouble).contiguous(), theta = theta_in.to(at::kDouble).contiguous();
  at::Tensor w = w_in.to(at::kDouble).contiguous(), bias = b_in.to(at::kDouble).contiguous();
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), M = theta.size(1);
  const int64_t K = static_cast<int64_t>(std::lround(std::sqrt(theta.size(2) + 1.0))), R = K / 2;
  at::Tensor out = at::zeros({B, C, H, W}, x.options());
  auto X = x.accessor<double, 4>();
  auto T = theta.accessor<double, 3>();
  auto Wt = w.accessor<double, 2>();
  auto Bs = bias.accessor<double, 1>();
  auto O = out.accessor<double, 4>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t xx = 0; xx < W; ++xx) {
          double total = Bs[c];
          for (int64_t m = 0; m < M; ++m) {
            double u = 0, s = 0;
            int64_t idx = 0;
            for (int64_t dy = -R; dy <= R; ++dy)
              for (int64_t dx = -R; dx <= R; ++dx) {
                if (dy == 0 && dx == 0) continue;
                double a = T[c][m][idx++];
                if (m >= n_free) a = std::abs(a);
                s += a;
                u += a * X[b][c][mirror(y + dy, H)][mirror(xx + dx, W)];
              }
            u -= s * X[b][c][y][xx];
            double v = act == "abs" ? std::abs(u) : act == "tanh" ? std::tanh(u) : u;
            total += Wt[c][m] * v;
          }
          O[b][c][y][xx] = total;
        }
  return out;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ZeroSumDense, ReflectIndexIsIteratedReflection) {
  // Hand-computed: n = 3 mirrors with period 4 (i = 0 1 2 3 4 -> 0 1 2 1 0; i = -1 -2 -3 -4 -> 1 2 1 0).
  const int64_t expect3[] = {0, 1, 2, 1, 0, 1, 2, 1, 0};  // i = -4..4
  for (int64_t i = -4; i <= 4; ++i) EXPECT_EQ(ops::reflect_index(i, 3), expect3[i + 4]) << "i=" << i;
  EXPECT_EQ(ops::reflect_index(5, 3), 1);
  EXPECT_EQ(ops::reflect_index(6, 3), 2);
  EXPECT_EQ(ops::reflect_index(-1, 2), 1);
  EXPECT_EQ(ops::reflect_index(-2, 2), 0);
  EXPECT_EQ(ops::reflect_index(3, 2), 1);
  EXPECT_EQ(ops::reflect_index(-3, 1), 0);
  EXPECT_EQ(ops::reflect_index(4, 1), 0);
}

TEST(ZeroSumDense, MatchesPlainLoop) {
  // Includes maps smaller than the radius (2x3 and 1x4 with K = 7 and 9), 1x1, and every activation.
  struct C2 {
    Case c;
    std::string act;
  };
  const C2 cases[] = {{{2, 2, 5, 6, 3, 2, 1}, "abs"},  {{1, 2, 2, 3, 7, 2, 1}, "abs"},
                      {{1, 1, 1, 1, 5, 1, 0}, "abs"},  {{1, 3, 4, 9, 9, 4, 2}, "abs"},
                      {{2, 1, 1, 4, 9, 2, 2}, "abs"},  {{1, 2, 6, 5, 5, 2, 1}, "tanh"},
                      {{1, 2, 3, 7, 3, 2, 0}, "none"}};
  for (const auto& [c, act] : cases) {
    opstest::Inputs in = opstest::make_inputs(c, 11);
    at::Tensor ref = loop_reference(in.x, in.theta, in.weight, in.bias, c.n_free, act);
    at::Tensor got = ops::zero_sum_dense(in.x, in.theta, in.weight, in.bias, c.n_free, act);
    EXPECT_LT(testutil::max_abs_diff(got, ref), 1e-12) << c.str() << " " << act;
  }
}

TEST(ZeroSumDense, KernelsSumToZero) {
  opstest::Inputs in = opstest::make_inputs({1, 4, 3, 3, 5, 2, 1}, 3);
  at::Tensor k = ops::zero_sum_kernels(in.theta, 1);
  ASSERT_EQ(k.sizes(), at::IntArrayRef({4, 2, 5, 5}));
  EXPECT_LT(k.sum({2, 3}).abs().max().item<double>(), 1e-12);
  // Centre-anchored family: every neighbour coefficient non-negative, the centre is -sum.
  at::Tensor nb = k.select(1, 1).reshape({4, 25});
  EXPECT_GE(at::cat({nb.narrow(1, 0, 12), nb.narrow(1, 13, 12)}, 1).min().item<double>(), 0.0);
}

TEST(ZeroSumFused, ConstantInputGivesBias) {
  // Zero-sum kernels annihilate constants, whatever the map size (reflection keeps it constant).
  for (auto hw : {std::pair<int64_t, int64_t>{1, 1}, {2, 5}, {9, 4}}) {
    Case c{2, 3, hw.first, hw.second, 7, 2, 1};
    opstest::Inputs in = opstest::make_inputs(c, 5);
    at::Tensor x = at::full({2, 3, hw.first, hw.second}, 2.5, at::kDouble);
    at::Tensor out = ops::zero_sum_fused(x, in.theta, in.weight, in.bias, 1);
    EXPECT_LT(testutil::max_abs_diff(out, in.bias.view({1, 3, 1, 1}).expand_as(out)), 1e-12);
  }
}

TEST(ZeroSumFused, MatchesDenseFloat64AllKernelSizesAndLayouts) {
  const char* layouts[] = {"nchw", "channels_last", "strided"};
  int n = 0;
  for (const Case& c : opstest::sweep_cases()) {
    opstest::Inputs in = opstest::make_inputs(c, 100 + n);
    opstest::Result ref = opstest::run_impl(in, c.n_free, "dense", at::kCPU, at::kDouble);
    for (const char* layout : layouts) {
      opstest::Result got = opstest::run_impl(in, c.n_free, "fused", at::kCPU, at::kDouble, layout);
      EXPECT_LT(opstest::max_rel_diff(got, ref), 1e-11) << c.str() << " layout " << layout;
    }
    ++n;
  }
}

TEST(ZeroSumFused, ThreeFiltersRunPaddedToFour) {
  Case c{2, 3, 9, 11, 5, 3, 1};
  opstest::Inputs in = opstest::make_inputs(c, 9);
  opstest::Result ref = opstest::run_impl(in, c.n_free, "dense", at::kCPU, at::kDouble);
  opstest::Result got = opstest::run_impl(in, c.n_free, "fused", at::kCPU, at::kDouble);
  EXPECT_LT(opstest::max_rel_diff(got, ref), 1e-11);
}

TEST(ZeroSumFused, FloatMatchesDenseAtStageSize) {
  Case c{2, 8, 64, 48, 7, 2, 1};
  opstest::Inputs in = opstest::make_inputs(c, 21);
  opstest::Result ref = opstest::run_impl(in, c.n_free, "dense", at::kCPU, at::kDouble);
  opstest::Result got = opstest::run_impl(in, c.n_free, "fused", at::kCPU, at::kFloat, "channels_last");
  EXPECT_LT(opstest::max_rel_diff(got, ref), 2e-5);
}

TEST(ZeroSumFused, FiniteDifferencesFloat64) {
  const Case cases[] = {{2, 2, 5, 6, 3, 2, 1},  {1, 2, 2, 3, 7, 2, 1},  {2, 1, 1, 4, 3, 1, 0},
                        {1, 2, 37, 53, 7, 2, 1}, {2, 2, 13, 7, 9, 4, 2}, {1, 3, 4, 17, 5, 1, 0},
                        {3, 1, 8, 8, 5, 4, 4}};
  uint64_t seed = 300;
  for (const Case& c : cases) EXPECT_LT(opstest::fd_check(c, at::kCPU, seed++), 1e-7) << c.str();
}

TEST(ZeroSumFused, GradientsAreBitIdenticalAcrossRunsAndThreadCounts) {
  Case c{2, 8, 45, 61, 7, 2, 1};
  EXPECT_TRUE(opstest::deterministic(c, at::kCPU, at::kFloat, 7));
  opstest::Inputs in = opstest::make_inputs(c, 8);
  const int threads = at::get_num_threads();
  opstest::Result a = opstest::run_impl(in, c.n_free, "fused", at::kCPU, at::kFloat);
  at::set_num_threads(1);
  opstest::Result b = opstest::run_impl(in, c.n_free, "fused", at::kCPU, at::kFloat);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(a.dtheta, b.dtheta) && at::equal(a.dweight, b.dweight) && at::equal(a.dbias, b.dbias) &&
              at::equal(a.dx, b.dx));
}

TEST(ZeroSumFused, OutputKeepsChannelsLast) {
  Case c{2, 4, 9, 7, 3, 2, 1};
  opstest::Inputs in = opstest::make_inputs(c, 12);
  at::Tensor x = in.x.contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor out = ops::zero_sum_fused(x, in.theta, in.weight, in.bias, 1);
  EXPECT_TRUE(out.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(ops::zero_sum_fused(in.x, in.theta, in.weight, in.bias, 1).is_contiguous());
  EXPECT_LT(testutil::max_abs_diff(out, loop_reference(in.x, in.theta, in.weight, in.bias, 1, "abs")), 1e-12);
}

TEST(ZeroSumFused, NoGradForwardOfBothImplementationsMatchesTheLoops) {
  Case c{2, 3, 11, 6, 5, 2, 1};
  opstest::Inputs in = opstest::make_inputs(c, 13);
  c10::NoGradGuard no_grad;
  at::Tensor ref = loop_reference(in.x, in.theta, in.weight, in.bias, 1, "abs");
  for (const char* impl : {"fused", "dense"})
    EXPECT_LT(testutil::max_abs_diff(ops::zero_sum(in.x, in.theta, in.weight, in.bias, 1, impl), ref), 1e-12) << impl;
  EXPECT_LT(testutil::max_abs_diff(ops::zero_sum(in.x, in.theta, in.weight, in.bias, 1, "dense", "tanh"),
                                   loop_reference(in.x, in.theta, in.weight, in.bias, 1, "tanh")),
            1e-12);
}

// Inference on channels_last activations whose channels fill SIMD vectors runs the channel-innermost
// kernel (no layout conversion): against the float64 loop for every K and M (3 runs padded to 4), maps
// narrower than a pixel block and smaller than the kernel (iterated reflection), float64 and float32;
// channel counts that do not fill the vectors take the plane kernel, with the same results.
TEST(ZeroSumFused, ChannelsLastInferenceMatchesTheLoop) {
  c10::NoGradGuard no_grad;
  struct Shape {
    int64_t B, C, H, W;
  };
  const Shape shapes[] = {{2, 16, 13, 37}, {1, 32, 2, 3}, {1, 16, 1, 5}, {1, 13, 6, 9}};
  uint64_t seed = 500;
  for (const Shape& sh : shapes)
    for (int64_t K : {3, 5, 7, 9})
      for (int64_t M : {1, 2, 3, 4}) {
        Case c{sh.B, sh.C, sh.H, sh.W, K, M, (M + 1) / 2};
        opstest::Inputs in = opstest::make_inputs(c, seed++);
        const at::Tensor ref = loop_reference(in.x, in.theta, in.weight, in.bias, c.n_free, "abs");
        for (const auto dt : {at::kDouble, at::kFloat}) {
          const at::Tensor x = in.x.to(dt).contiguous(at::MemoryFormat::ChannelsLast);
          const at::Tensor out =
              ops::zero_sum(x, in.theta.to(dt), in.weight.to(dt), in.bias.to(dt), c.n_free, "fused");
          EXPECT_TRUE(out.is_contiguous(at::MemoryFormat::ChannelsLast)) << c.str();
          EXPECT_EQ(out.scalar_type(), dt);
          const double scale = ref.abs().max().item<double>();
          EXPECT_LT(testutil::max_abs_diff(out.to(at::kDouble), ref) / scale, dt == at::kDouble ? 1e-12 : 2e-6)
              << c.str() << " " << dt;
        }
      }
}

// The one rule that picks an implementation, against the table written out by hand.
TEST(ZeroSumImpl, ChoiceFollowsTheRule) {
  struct Row {
    const char *filter, *activation, *requested;
    bool forced, inference;
    const char* expected;
  };
  const Row rows[] = {
      {"zero_sum", "abs", "fused", false, false, "fused"},  {"zero_sum", "abs", "fused", false, true, "fused"},
      {"zero_sum", "abs", "dense", false, false, "dense"},  {"zero_sum", "abs", "dense", false, true, "fused"},
      {"zero_sum", "abs", "dense", true, true, "dense"},    {"zero_sum", "abs", "dense", true, false, "dense"},
      {"zero_sum", "abs", "fused", true, true, "fused"},    {"zero_sum", "tanh", "fused", false, true, "dense"},
      {"zero_sum", "none", "fused", false, false, "dense"}, {"srm", "abs", "fused", false, true, "dense"},
      {"free", "abs", "fused", false, false, "dense"},      {"bayar", "abs", "fused", false, true, "dense"},
  };
  for (const Row& r : rows)
    EXPECT_EQ(ops::zero_sum_impl_for(r.filter, r.activation, r.requested, r.forced, r.inference), r.expected)
        << r.filter << " " << r.activation << " " << r.requested << " forced " << r.forced << " inference "
        << r.inference;
  EXPECT_NE(error_of([] { ops::zero_sum_impl_for("zero_sum", "abs", "sparse", false, true); }).find("dense|fused"),
            std::string::npos);
}

// The registered op: the dispatcher finds the schema and a kernel for the CPU, and bf16 inputs under CPU
// autocast run in float32 (the result equals the float32 op on the same bf16-rounded values).
TEST(ZeroSumFused, RegisteredOpAndAutocast) {
  auto schema = c10::Dispatcher::singleton().findSchema({"diffnet::zero_sum_fused", ""});
  ASSERT_TRUE(schema.has_value());
  EXPECT_TRUE(schema->hasKernelForDispatchKey(c10::DispatchKey::CPU));
  EXPECT_TRUE(schema->hasKernelForDispatchKey(c10::DispatchKey::AutocastCPU));
  Case c{2, 4, 10, 9, 7, 2, 1};
  opstest::Inputs in = opstest::make_inputs(c, 14);
  at::Tensor xb = in.x.to(at::kBFloat16), tb = in.theta.to(at::kFloat), wb = in.weight.to(at::kFloat),
             bb = in.bias.to(at::kFloat);
  at::Tensor out;
  {
    at::autocast::set_cpu_enabled(true);
    out = ops::zero_sum_fused(xb, tb, wb, bb, 1);
    at::autocast::set_cpu_enabled(false);
  }
  EXPECT_EQ(out.scalar_type(), at::kFloat);
  at::Tensor ref = loop_reference(xb.to(at::kDouble), tb.to(at::kDouble), wb.to(at::kDouble), bb.to(at::kDouble), 1,
                                  "abs");
  EXPECT_LT(testutil::max_abs_diff(out.to(at::kDouble), ref), 1e-4);
  // Without autocast, bf16 is refused with a message that says what is supported.
  EXPECT_NE(error_of([&] { ops::zero_sum_fused(xb, tb.to(at::kBFloat16), wb.to(at::kBFloat16), bb.to(at::kBFloat16), 1); })
                .find("float32/float64"),
            std::string::npos);
}

TEST(ZeroSumFused, BadArgumentsAreOneLineErrors) {
  at::Tensor x = at::randn({1, 2, 8, 8});
  at::Tensor w = at::randn({2, 2}), b = at::randn({2});
  EXPECT_NE(error_of([&] { ops::zero_sum_fused(x, at::randn({2, 2, 120}), w, b, 1); }).find("K in {3, 5, 7, 9}"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::zero_sum_fused(x, at::randn({2, 5, 8}), at::randn({2, 5}), b, 1); })
                .find("1..4 filters"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::zero_sum_fused(x, at::randn({2, 2, 7}), w, b, 1); }).find("K*K-1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::zero_sum_fused(x, at::randn({3, 2, 8}), w, b, 1); }).find("theta"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::zero_sum_fused(x, at::randn({2, 2, 8}), w, at::randn({3}), 1); }).find("bias"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::zero_sum_fused(x, at::randn({2, 2, 8}), w, b, 3); }).find("n_free"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::zero_sum_fused(x.to(at::kHalf), at::randn({2, 2, 8}).to(at::kHalf),
                                               w.to(at::kHalf), b.to(at::kHalf), 1); })
                .find("float32/float64"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::zero_sum_fused(x, at::randn({2, 2, 8}, at::kDouble), w, b, 1); }).find("dtype"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::zero_sum(x, at::randn({2, 2, 8}), w, b, 1, "fused", "tanh"); }).find("abs"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::zero_sum(x, at::randn({2, 2, 8}), w, b, 1, "sparse"); }).find("dense|fused"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::zero_sum_dense(x, at::randn({2, 2, 8}), w, b, 1, "relu"); }).find("activation"),
            std::string::npos);
}

TEST(ZeroSumBench, QuickJsonHasOneLinePerCaseAndPass) {
  ops::ZeroSumBenchOptions opt;
  opt.json = true;
  opt.quick = true;
  opt.iters = 1;
  testing::internal::CaptureStdout();
  EXPECT_EQ(ops::run_zero_sum_bench(opt), 0);
  std::string out = testing::internal::GetCapturedStdout();
  std::istringstream lines(out);
  std::string line;
  int n = 0, fwd = 0;
  while (std::getline(lines, line)) {
    ++n;
    EXPECT_EQ(line.front(), '{');
    EXPECT_EQ(line.back(), '}');
    for (const char* key : {"\"case\":", "\"shape\":[", "\"dense_ms\":", "\"fused_ms\":", "\"speedup\":"})
      EXPECT_NE(line.find(key), std::string::npos) << key << " missing in " << line;
    if (line.find("\"pass\":\"fwd\"") != std::string::npos) ++fwd;
  }
  EXPECT_EQ(n, 4);
  EXPECT_EQ(fwd, 2);
  opt.device = "tpu";
  EXPECT_THROW(ops::run_zero_sum_bench(opt), Error);
}

TEST(ZeroSumCuda, SweepOnGpu) {
  if (!ops::zero_sum_has_cuda()) GTEST_SKIP() << "built without DIFFNET_CUDA";
  if (!ops::zero_sum_cuda_available()) GTEST_SKIP() << "no CUDA device";
  EXPECT_EQ(opstest::run_device_checks(at::Device(at::kCUDA, 0), true), 0);
}
