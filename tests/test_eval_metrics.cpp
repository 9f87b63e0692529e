// Metrics against hand-computed values and a brute-force pairwise AUC.
#include <random>

#include "diffnet/common.h"
#include "diffnet/metrics.h"
#include "testing.h"

using namespace diffnet;

namespace {
at::Tensor u8(std::vector<std::vector<int>> rows) {
  const int64_t H = int64_t(rows.size()), W = int64_t(rows[0].size());
  at::Tensor t = at::zeros({H, W}, at::kByte);
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) t[y][x] = rows[size_t(y)][size_t(x)];
  return t;
}
}  // namespace

TEST(EvalMetrics, CountsThresholdAt127AndAnyNonZeroGt) {
  // Positive predictions: u8 > 127 -> (0,2) (0,3) (1,0) (1,2). GT non-zero -> (0,1) (0,2) (1,0).
  at::Tensor pred = u8({{0, 127, 128, 255}, {200, 10, 130, 127}});
  at::Tensor gt = u8({{0, 1, 255, 0}, {7, 0, 0, 0}});
  PixelCounts c = count_pixels(pred, gt);
  EXPECT_EQ(c.tp, 2);
  EXPECT_EQ(c.fp, 2);
  EXPECT_EQ(c.fn, 1);
  EXPECT_EQ(c.tn, 3);
  PRF r = prf(c);
  EXPECT_NEAR(r.precision, 0.5, 1e-7);
  EXPECT_NEAR(r.recall, 2.0 / 3.0, 1e-7);
  EXPECT_NEAR(r.f1, 4.0 / 7.0, 1e-7);
  EXPECT_NEAR(r.iou, 2.0 / 5.0, 1e-7);
  EXPECT_NEAR(forensichub_f1(c), 4.0 / 7.0, 1e-7);
}

TEST(EvalMetrics, SizeMismatchIsAnErrorNamingTheSubject) {
  try {
    count_pixels(at::zeros({2, 3}, at::kByte), at::zeros({3, 2}, at::kByte), "a.png vs b.png");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a.png vs b.png"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("size mismatch"), std::string::npos);
  }
}

TEST(EvalMetrics, NoPositivesAnywhereGivesZerosAndNulls) {
  MetricsAccumulator acc;
  acc.add(at::zeros({4, 4}, at::kByte), at::zeros({4, 4}, at::kByte), 0.1);
  acc.add(at::zeros({2, 5}, at::kByte), at::zeros({2, 5}, at::kByte), 0.2);
  EvalMetrics m = acc.result();
  EXPECT_EQ(m.num_images, 2);
  EXPECT_EQ(m.num_tampered, 0);
  EXPECT_EQ(m.pixel.tn, 26);
  EXPECT_EQ(m.pixel_prf.precision, 0.0);
  EXPECT_EQ(m.pixel_prf.recall, 0.0);
  EXPECT_EQ(m.pixel_prf.f1, 0.0);
  EXPECT_EQ(m.pixel_prf.iou, 0.0);
  EXPECT_EQ(m.image.tn, 2);
  EXPECT_EQ(m.image_prf.f1, 0.0);
  EXPECT_FALSE(m.image_auc.has_value());  // one class only
  EXPECT_FALSE(m.doc_f1.has_value());     // no tampered image to average over
  nlohmann::json j = metrics_to_json(m, "doc");
  EXPECT_TRUE(j["doc_f1"].is_null());
  EXPECT_TRUE(j["image_auc"].is_null());
  EXPECT_EQ(j["num_images"], 2);
}

TEST(EvalMetrics, Syn2RealSumsWhileDocAveragesTamperedImages) {
  MetricsAccumulator acc;
  // A: TP 1, FP 0, FN 0 -> per-image F1 1.
  acc.add(u8({{255, 0}, {0, 0}}), u8({{1, 0}, {0, 0}}), 0.9);
  // B: TP 1, FP 3, FN 0 -> P 1/4, R 1, F1 2/5.
  acc.add(u8({{255, 255}, {255, 255}}), u8({{1, 0}, {0, 0}}), 0.5);
  // C: pristine, 2 FP; it enters the global counts only.
  acc.add(u8({{0, 200}, {200, 0}}), u8({{0, 0}, {0, 0}}), 0.7);
  // D: pristine, clean.
  acc.add(u8({{0, 0}, {0, 0}}), u8({{0, 0}, {0, 0}}), 0.2);
  EvalMetrics m = acc.result();
  EXPECT_EQ(m.num_images, 4);
  EXPECT_EQ(m.num_tampered, 2);
  EXPECT_EQ(m.pixel.tp, 2);
  EXPECT_EQ(m.pixel.fp, 5);
  EXPECT_EQ(m.pixel.fn, 0);
  EXPECT_EQ(m.pixel.tn, 9);
  EXPECT_NEAR(m.pixel_prf.f1, 4.0 / 9.0, 1e-7);
  EXPECT_NEAR(m.pixel_prf.iou, 2.0 / 7.0, 1e-7);
  ASSERT_TRUE(m.doc_f1.has_value());
  EXPECT_NEAR(*m.doc_f1, (1.0 + 0.4) / 2.0, 1e-7);
  // Image level at > 0.5: A tp, B fn (0.5 is not > 0.5), C fp, D tn.
  EXPECT_EQ(m.image.tp, 1);
  EXPECT_EQ(m.image.fn, 1);
  EXPECT_EQ(m.image.fp, 1);
  EXPECT_EQ(m.image.tn, 1);
  EXPECT_NEAR(m.image_prf.precision, 0.5, 1e-7);
  EXPECT_NEAR(m.image_prf.recall, 0.5, 1e-7);
  EXPECT_NEAR(m.image_prf.f1, 0.5, 1e-7);
  // AUC: positives {0.9, 0.5}, negatives {0.7, 0.2}: pairs won 0.9>0.7, 0.9>0.2, 0.5>0.2 -> 3/4.
  ASSERT_TRUE(m.image_auc.has_value());
  EXPECT_NEAR(*m.image_auc, 0.75, 1e-12);
  // The same images at an image threshold of 0.8: A tp, B fn, C tn (0.7), D tn; the AUC does not move.
  MetricsAccumulator high(0.8);
  high.add(u8({{255, 0}, {0, 0}}), u8({{1, 0}, {0, 0}}), 0.9);
  high.add(u8({{255, 255}, {255, 255}}), u8({{1, 0}, {0, 0}}), 0.5);
  high.add(u8({{0, 200}, {200, 0}}), u8({{0, 0}, {0, 0}}), 0.7);
  high.add(u8({{0, 0}, {0, 0}}), u8({{0, 0}, {0, 0}}), 0.2);
  EvalMetrics h = high.result();
  EXPECT_EQ(h.image.tp, 1);
  EXPECT_EQ(h.image.fn, 1);
  EXPECT_EQ(h.image.fp, 0);
  EXPECT_EQ(h.image.tn, 2);
  EXPECT_NEAR(*h.image_auc, 0.75, 1e-12);
  EXPECT_EQ(metrics_to_json(h, "doc")["image_threshold"].get<double>(), 0.8);
}

TEST(EvalMetrics, AucHandComputedWithTies) {
  EXPECT_NEAR(*roc_auc({0.1, 0.4, 0.35, 0.8}, {0, 0, 1, 1}), 0.75, 1e-12);
  // Ties count one half: pos 0.5 vs negs {0.5, 0.5} -> 1, pos 0.9 vs both -> 2; 3 / 4.
  EXPECT_NEAR(*roc_auc({0.5, 0.5, 0.5, 0.9}, {0, 1, 0, 1}), 0.75, 1e-12);
  EXPECT_NEAR(*roc_auc({0.3, 0.3, 0.3}, {1, 0, 1}), 0.5, 1e-12);
  EXPECT_NEAR(*roc_auc({0.9, 0.1}, {0, 1}), 0.0, 1e-12);
  EXPECT_FALSE(roc_auc({0.3, 0.4}, {1, 1}).has_value());
  EXPECT_FALSE(roc_auc({}, {}).has_value());
}

TEST(EvalMetrics, AucMatchesBruteForcePairs) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(0, 9);  // few levels -> many ties
  std::bernoulli_distribution coin(0.4);
  std::vector<double> s;
  std::vector<int> l;
  for (int i = 0; i < 300; ++i) {
    s.push_back(level(rng) / 10.0);
    l.push_back(coin(rng) ? 1 : 0);
  }
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < s.size(); ++i)
    for (size_t j = 0; j < s.size(); ++j)
      if (l[i] == 1 && l[j] == 0) {
        pairs += 1;
        wins += s[i] > s[j] ? 1.0 : (s[i] == s[j] ? 0.5 : 0.0);
      }
  EXPECT_NEAR(*roc_auc(s, l), wins / pairs, 1e-12);
}

TEST(EvalMetrics, ProtocolNames) {
  check_protocol("syn2real");
  check_protocol("doc");
  EXPECT_THROW(check_protocol("docs"), Error);
}
