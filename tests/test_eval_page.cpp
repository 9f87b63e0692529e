// Whole-page pieces without a model, against independent computations: raised-cosine blending (weights
// by hand, a constant stays constant, no seams where max-merge has them), the content mask, masked
// quantiles against a sort, the logistic fit against its closed form, calibration by hand, reliability.
#include <algorithm>
#include <cmath>
#include <vector>

#include "diffnet/calibration.h"
#include "diffnet/common.h"
#include "diffnet/predict.h"
#include "testing.h"

using namespace diffnet;

namespace {
const double kPi = std::acos(-1.0);

// Largest difference between horizontally or vertically adjacent pixels.
double max_step(const at::Tensor& m) {
  double dy = (m.slice(0, 1) - m.slice(0, 0, -1)).abs().max().item<double>();
  double dx = (m.slice(1, 1) - m.slice(1, 0, -1)).abs().max().item<double>();
  return std::max(dx, dy);
}
}  // namespace

TEST(EvalBlend, ProfileByHand) {
  // Interior window (origin 64 of 256): sin^2(pi (t + 0.5) / 64), floored at 1e-3.
  std::vector<float> w = blend_profile(64, 64, 256);
  ASSERT_EQ(w.size(), 64u);
  for (int t = 0; t < 64; ++t) {
    double want = std::max(1e-3, std::pow(std::sin(kPi * (t + 0.5) / 64), 2));
    EXPECT_NEAR(w[size_t(t)], want, 1e-6) << t;
  }
  EXPECT_NEAR(w[0], 1e-3, 1e-9);  // the floor: sin^2(pi / 128) = 6e-4 < 1e-3
  // First window: its first half is flat at 1 (the page edge is covered at full weight); last window:
  // its second half; a window covering the whole canvas: 1 everywhere.
  std::vector<float> first = blend_profile(64, 0, 256), last = blend_profile(64, 192, 256), all = blend_profile(64, 0, 64);
  for (int t = 0; t < 32; ++t) {
    EXPECT_EQ(first[size_t(t)], 1.0f);
    EXPECT_NEAR(last[size_t(t)], w[size_t(t)], 1e-7);
  }
  for (int t = 32; t < 64; ++t) {
    EXPECT_NEAR(first[size_t(t)], w[size_t(t)], 1e-7);
    EXPECT_EQ(last[size_t(t)], 1.0f);
  }
  for (float v : all) EXPECT_EQ(v, 1.0f);
}

TEST(EvalBlend, ConstantWindowsGiveAConstantMap) {
  // A model whose every output is 0.37: the blended map is 0.37 everywhere (any stride, edge windows).
  for (int64_t stride : {8, 24, 32, 64}) {
    const int64_t H = 200, W = 136, R = 64;
    std::vector<WindowPos> win = plan_windows(H, W, R, stride);
    BlendMerger m(padded_extent(H, R), padded_extent(W, R));
    for (const WindowPos& p : win) m.add(at::full({R, R}, 0.37f), p);
    at::Tensor out = m.take();
    EXPECT_LT((out - 0.37f).abs().max().item<double>(), 1e-6) << "stride " << stride;
  }
}

TEST(EvalBlend, NoSeamsWhereMaxMergeHasThem) {
  // Every window outputs its own constant in [0, 1]. Max-merge jumps at window borders; the blend
  // changes smoothly: with R 64 and stride 32 two overlapping raised cosines sum to 1, so the slope is
  // at most |c1 - c2| * pi / 64 ~ 0.05 per pixel (a little more where the shifted last window overlaps).
  const int64_t H = 232, W = 200, R = 64, S = 32;
  std::vector<WindowPos> win = plan_windows(H, W, R, S);
  const int64_t Hp = padded_extent(H, R), Wp = padded_extent(W, R);
  BlendMerger blend(Hp, Wp);
  at::Tensor maxed = at::zeros({Hp, Wp}, at::kFloat);
  at::Generator gen = at::detail::createCPUGenerator(9);
  for (const WindowPos& p : win) {
    at::Tensor v = at::full({R, R}, at::rand({1}, gen).item<float>());
    blend.add(v, p);
    max_merge(maxed, v, p);
  }
  at::Tensor b = blend.take();
  EXPECT_GT(max_step(maxed), 0.3) << "the test needs windows that differ";
  EXPECT_LT(max_step(b), 0.1);
  // The blend stays inside the range of the window values.
  EXPECT_GE(b.min().item<double>(), 0.0);
  EXPECT_LE(b.max().item<double>(), 1.0);
}

TEST(EvalBlend, EqualsMaxMergeWithoutOverlap) {
  // Non-overlapping windows (stride R on a canvas that is a multiple of R): each pixel has one window.
  const int64_t R = 32;
  std::vector<WindowPos> win = plan_windows(96, 64, R, R);
  BlendMerger blend(96, 64);
  at::Tensor maxed = at::zeros({96, 64}, at::kFloat);
  at::Generator gen = at::detail::createCPUGenerator(10);
  for (const WindowPos& p : win) {
    at::Tensor v = at::rand({R, R}, gen);
    blend.add(v, p);
    max_merge(maxed, v, p);
  }
  EXPECT_LT(testutil::max_abs_diff(blend.take(), maxed), 1e-6);
}

TEST(EvalPage, ContentBlocks) {
  at::Tensor img = at::full({64, 80, 3}, 255, at::kByte);
  EXPECT_FALSE(content_blocks(img).any().item<bool>()) << "a white page has no content";
  // Faint uniform paper noise (range < 32) is not content either.
  img.slice(0, 0, 64).slice(1, 0, 80).fill_(240);
  img.slice(0, 0, 64, 2).slice(1, 0, 80, 3).fill_(250);
  EXPECT_FALSE(content_blocks(img).any().item<bool>());
  // One dark stroke in block (3, 5): content there and within 2 blocks around it (dilation), except
  // blocks of exactly uniform colour.
  img.fill_(255);
  img.slice(0, 26, 28).slice(1, 42, 46).fill_(20);
  at::Tensor c = content_blocks(img);
  ASSERT_EQ(c.sizes(), (std::vector<int64_t>{8, 10}));
  for (int64_t y = 0; y < 8; ++y)
    for (int64_t x = 0; x < 10; ++x) EXPECT_EQ(c[y][x].item<bool>(), y == 3 && x == 5) << y << "," << x;
  // On textured paper the dilated ring counts (an erased word next to text stays in the page's content).
  img.slice(0, 0, 64, 2).slice(1, 0, 80, 3).fill_(250);
  img.slice(0, 1, 64, 2).slice(1, 0, 80, 3).fill_(248);
  img.slice(0, 26, 28).slice(1, 42, 46).fill_(20);
  c = content_blocks(img);
  for (int64_t y = 0; y < 8; ++y)
    for (int64_t x = 0; x < 10; ++x) EXPECT_EQ(c[y][x].item<bool>(), std::abs(y - 3) <= 2 && std::abs(x - 5) <= 2) << y << "," << x;
}

TEST(EvalPage, MaskedQuantileAgainstASort) {
  at::Generator gen = at::detail::createCPUGenerator(4);
  at::Tensor p = at::rand({100, 120}, gen).pow(3);
  at::Tensor mask = at::rand({100, 120}, gen) > 0.4;
  std::vector<float> v;
  at::Tensor sel = p.masked_select(mask).contiguous();
  v.assign(sel.data_ptr<float>(), sel.data_ptr<float>() + sel.numel());
  std::sort(v.begin(), v.end());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    // The smallest value with at least a share q of the values at or below it.
    const size_t k = size_t(std::ceil(q * double(v.size()))) - 1;
    EXPECT_NEAR(masked_quantile(p, mask, q), v[k], 1.0 / 4096 + 1e-6) << q;
  }
  EXPECT_EQ(masked_quantile(p, at::zeros_like(mask), 0.99), 0.0);
}

TEST(EvalPage, MaskedQuantileWithBlockCells) {
  // A block mask (cell 8) selects the same pixels as that mask expanded to pixels, the last blocks cut
  // by the map's edge (H, W not multiples of 8).
  at::Generator gen = at::detail::createCPUGenerator(5);
  at::Tensor p = at::rand({101, 75}, gen);
  at::Tensor blocks = at::rand({13, 10}, gen) > 0.5;
  at::Tensor pixels = blocks.repeat_interleave(8, 0).repeat_interleave(8, 1).slice(0, 0, 101).slice(1, 0, 75);
  for (double q : {0.1, 0.5, 0.99, 0.999})
    EXPECT_EQ(masked_quantile(p, blocks, q, 8), masked_quantile(p, pixels, q)) << q;
  EXPECT_THROW(masked_quantile(p, blocks.slice(0, 0, 12), 0.5, 8), Error) << "mask too small";
  // Several quantiles in one pass: the same values, and the number of pixels in.
  MaskedQuantiles mq = masked_quantiles(p, blocks, {0.5, 0.99}, 8);
  EXPECT_EQ(mq.count, pixels.sum().item<int64_t>());
  ASSERT_EQ(mq.values.size(), 2u);
  EXPECT_EQ(mq.values[0], masked_quantile(p, pixels, 0.5));
  EXPECT_EQ(mq.values[1], masked_quantile(p, pixels, 0.99));
}

TEST(EvalPage, ContentBlocksOfATallPageAgainstALoop) {
  // Many bands of block rows (the mask is computed a band at a time): float64 loops as the reference.
  at::Generator gen = at::detail::createCPUGenerator(6);
  const int64_t H = 8 * 75, W = 8 * 9;
  at::Tensor img = at::full({H, W, 3}, 255, at::kByte);
  // Sparse dark strokes and faint noise.
  at::Tensor noise = (at::rand({H, W, 3}, gen) * 20).to(at::kByte);
  img.sub_(noise);
  at::Tensor ink = at::rand({H / 8, W / 8}, gen) > 0.93;
  for (int64_t by = 0; by < H / 8; ++by)
    for (int64_t bx = 0; bx < W / 8; ++bx)
      if (ink[by][bx].item<bool>()) img.slice(0, by * 8 + 2, by * 8 + 4).slice(1, bx * 8 + 1, bx * 8 + 6).fill_(30);
  img.slice(0, 8 * 40, 8 * 44).fill_(255);  // exactly uniform blocks: never content
  at::Tensor c = content_blocks(img);
  auto a = img.accessor<uint8_t, 3>();
  const int64_t Hb = H / 8, Wb = W / 8;
  std::vector<double> range(size_t(Hb * Wb));
  for (int64_t by = 0; by < Hb; ++by)
    for (int64_t bx = 0; bx < Wb; ++bx) {
      double lo = 1e9, hi = -1e9;
      for (int64_t y = by * 8; y < by * 8 + 8; ++y)
        for (int64_t x = bx * 8; x < bx * 8 + 8; ++x) {
          const double l = 0.299 * a[y][x][0] + 0.587 * a[y][x][1] + 0.114 * a[y][x][2];
          lo = std::min(lo, l), hi = std::max(hi, l);
        }
      range[size_t(by * Wb + bx)] = hi - lo;
    }
  int64_t checked = 0;
  for (int64_t by = 0; by < Hb; ++by)
    for (int64_t bx = 0; bx < Wb; ++bx) {
      const double r = range[size_t(by * Wb + bx)];
      if (std::abs(r - double(kContentRange)) < 0.01) continue;  // float vs double at the threshold
      bool near = false;
      for (int64_t y = std::max<int64_t>(0, by - kContentDilate); y <= std::min(Hb - 1, by + kContentDilate); ++y)
        for (int64_t x = std::max<int64_t>(0, bx - kContentDilate); x <= std::min(Wb - 1, bx + kContentDilate); ++x)
          near = near || range[size_t(y * Wb + x)] >= double(kContentRange);
      const bool want = r >= double(kContentRange) || (near && r > 0);
      EXPECT_EQ(c[by][bx].item<bool>(), want) << by << "," << bx;
      ++checked;
    }
  EXPECT_GT(checked, Hb * Wb * 9 / 10);
  EXPECT_GT(c.sum().item<int64_t>(), 20) << "the page needs content";
  EXPECT_FALSE(c.slice(0, 40, 44).any().item<bool>());
}

TEST(EvalCalibration, LogisticFitMatchesTheClosedForm) {
  // One binary feature: the maximum-likelihood fit reproduces the two groups' log-odds exactly:
  // x = 0: 3 tampered of 10 -> b = log(3/7); x = 1: 8 of 10 -> a + b = log(8/2).
  std::vector<double> x;
  std::vector<int> y;
  for (int i = 0; i < 10; ++i) x.push_back(0), y.push_back(i < 3);
  for (int i = 0; i < 10; ++i) x.push_back(1), y.push_back(i < 8);
  LogisticFit f = fit_logistic(x, y, {}, 0.0);
  EXPECT_TRUE(f.converged);
  EXPECT_NEAR(f.b, std::log(3.0 / 7.0), 1e-8);
  EXPECT_NEAR(f.a, std::log(4.0) - std::log(3.0 / 7.0), 1e-8);
  // Its log loss: -(1/20) sum of log-likelihoods at the group rates.
  const double ll = -(3 * std::log(0.3) + 7 * std::log(0.7) + 8 * std::log(0.8) + 2 * std::log(0.2)) / 20;
  EXPECT_NEAR(f.log_loss, ll, 1e-10);
  // Weights act as counts: weight 2 on the x = 0 positives = 6 of 13 -> b = log(6/7).
  std::vector<double> w(20, 1.0);
  for (int i = 0; i < 3; ++i) w[size_t(i)] = 2;
  LogisticFit g = fit_logistic(x, y, w, 0.0);
  EXPECT_NEAR(g.b, std::log(6.0 / 7.0), 1e-8);
  EXPECT_NEAR(g.a + g.b, std::log(4.0), 1e-8);
  // Balanced weights: n / (2 n_class); 11 positives and 9 negatives.
  std::vector<double> bw = balanced_weights(y);
  EXPECT_NEAR(bw[0], 20.0 / 22.0, 1e-12);  // y[0] = 1
  EXPECT_NEAR(bw[5], 20.0 / 18.0, 1e-12);  // y[5] = 0
  // Separable data: the ridge keeps the slope finite and the fit converges, ranking preserved.
  LogisticFit s = fit_logistic({0.1, 0.2, 0.3, 0.7, 0.8, 0.9}, {0, 0, 0, 1, 1, 1}, {}, 1e-3);
  EXPECT_TRUE(s.converged);
  EXPECT_TRUE(std::isfinite(s.a) && s.a > 0);
  EXPECT_THROW(fit_logistic({}, {}), Error);
  EXPECT_THROW(fit_logistic({1, 2}, {0}), Error);
}

TEST(EvalCalibration, FalseAlarmThresholdIsAnOrderStatistic) {
  // Ten untouched scores (unsorted): at 10 % one may be above -> the second highest, 0.8; at 0 the
  // highest; at 25 % floor(2.5) = 2 above -> the third highest; 0.05 of 60 is 3 (not 2 by rounding).
  const std::vector<double> s = {0.3, 0.9, 0.1, 0.8, 0.5, 0.7, 0.2, 0.6, 0.4, 0.05};
  EXPECT_EQ(false_alarm_threshold(s, 0.1), 0.8);
  EXPECT_EQ(false_alarm_threshold(s, 0.0), 0.9);
  EXPECT_EQ(false_alarm_threshold(s, 0.25), 0.7);
  EXPECT_EQ(false_alarm_threshold(s, 0.99), 0.05);  // never past the lowest
  std::vector<double> sixty(60);
  for (int i = 0; i < 60; ++i) sixty[size_t(i)] = i / 100.0;
  EXPECT_EQ(false_alarm_threshold(sixty, 0.05), 0.56);  // 0.57, 0.58, 0.59 above
  // Ties: three pages at 0.8 and the rule "at most one above" gives 0.8 (none above), not a lower score.
  EXPECT_EQ(false_alarm_threshold({0.8, 0.8, 0.8, 0.1}, 0.25), 0.8);
  EXPECT_THROW(false_alarm_threshold({}, 0.05), Error);
  EXPECT_THROW(false_alarm_threshold(s, 1.0), Error);
  EXPECT_THROW(false_alarm_threshold(s, -0.1), Error);
}

TEST(EvalCalibration, AppliedByHand) {
  PageCalibration c;
  c.statistic = "q999";
  c.transform = "logit";
  c.a = 2, c.b = -1;
  // logit(0.8) = log 4; p = 1 / (1 + exp(-(2 log 4 - 1))).
  EXPECT_NEAR(c.apply(0.8), 1.0 / (1.0 + std::exp(-(2 * std::log(4.0) - 1))), 1e-12);
  c.transform = "identity";
  EXPECT_NEAR(c.apply(0.8), 1.0 / (1.0 + std::exp(-(1.6 - 1))), 1e-12);
  // JSON round trip, and bad metadata is an error naming the file.
  PageCalibration d = PageCalibration::from_json(nlohmann::json::parse(c.to_json().dump()), "w.safetensors");
  EXPECT_EQ(d.statistic, "q999");
  EXPECT_EQ(d.transform, "identity");
  EXPECT_EQ(d.a, 2);
  EXPECT_EQ(d.b, -1);
  try {
    PageCalibration::from_json(nlohmann::json{{"statistic", "nope"}, {"a", 1}, {"b", 0}}, "w.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos);
  }
  EXPECT_THROW(PageCalibration::from_json(nlohmann::json{{"statistic", "q99"}}, "w"), Error);
}

TEST(EvalCalibration, ReliabilityByHand) {
  // Bins of 0.5: [0, 0.5) holds 0.1 (y 0), 0.3 (y 1); [0.5, 1] holds 0.6 (y 1), 0.9 (y 1), 1.0 (y 0).
  Reliability r = reliability({0.1, 0.3, 0.6, 0.9, 1.0}, {0, 1, 1, 1, 0}, 2);
  ASSERT_EQ(r.bins.size(), 2u);
  EXPECT_EQ(r.bins[0].count, 2);
  EXPECT_NEAR(r.bins[0].mean_p, 0.2, 1e-12);
  EXPECT_NEAR(r.bins[0].frequency, 0.5, 1e-12);
  EXPECT_EQ(r.bins[1].count, 3);
  EXPECT_NEAR(r.bins[1].mean_p, 2.5 / 3, 1e-12);
  EXPECT_NEAR(r.bins[1].frequency, 2.0 / 3, 1e-12);
  EXPECT_NEAR(r.brier, (0.01 + 0.49 + 0.16 + 0.01 + 1.0) / 5, 1e-12);
  EXPECT_NEAR(r.ece, 2.0 / 5 * 0.3 + 3.0 / 5 * (2.5 / 3 - 2.0 / 3), 1e-12);
  std::vector<uint8_t> img = draw_reliability_diagram(r, "TEST", 300);
  EXPECT_EQ(img.size(), 300u * 300 * 3);
}
