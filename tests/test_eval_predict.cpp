// Predictor and `diffnet predict`: window results against direct forward calls computed here, max-merge
// over hand-listed windows, batching, and the CLI's files/records/errors (random-init model: these
// check plumbing, not accuracy).
#include <torch/torch.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "diffnet/common.h"
#include "diffnet/dct.h"
#include "diffnet/image_io.h"
#include "diffnet/model.h"
#include "diffnet/predict.h"
#include "diffnet/prediction_writer.h"
#include "eval_testing.h"
#include "testing.h"

using namespace diffnet;

namespace {

using testutil::tiny_model;

at::Tensor test_image(int64_t H, int64_t W, int seed) { return testutil::test_page(H, W, seed); }

struct Direct {
  at::Tensor prob;  // (R, R)
  double score;
};
Direct direct_forward(const at::Tensor& rgb, const at::Tensor& dct, const at::Tensor& qt) {
  torch::NoGradGuard no_grad;
  DiffNetOutput out = tiny_model().model->forward(normalize_rgb(rgb), dct.unsqueeze(0), qt.view({1, 64}));
  return {out.seg_logits.softmax(1)[0][1].to(at::kFloat), out.cls_logits.softmax(1)[0][1].item<double>()};
}

Predictor make_predictor(int64_t batch = 2, int64_t stride = 0, const std::string& dct_source = "auto",
                         const std::string& merge = "blend") {
  PredictOptions opt;
  opt.batch = batch;
  opt.stride = stride;
  opt.dct_source = dct_source;
  opt.merge = merge;
  return Predictor(load_weights(tiny_model().path), opt);
}

// The tiny model saved again with `calibration` metadata (train_size 64 as before).
std::string calibrated_weights(const nlohmann::json& cal, const std::string& tag) {
  std::string path = testutil::temp_dir("calibrated-" + tag) + "/w.safetensors";
  save_model(tiny_model().model, path, at::kFloat, {{"train_size", "64"}, {"calibration", cal.dump()}});
  return path;
}

// Raised-cosine weight written out here (not blend_profile): sin^2(pi (t + 0.5) / R), 1 on a half that
// touches the canvas border, at least 1e-3.
double test_weight(int64_t t, int64_t R, int64_t origin, int64_t extent) {
  const double pi = std::acos(-1.0);
  if ((origin == 0 && 2 * t + 1 < R) || (origin + R == extent && 2 * t + 1 >= R)) return 1.0;
  return std::max(1e-3, std::pow(std::sin(pi * (double(t) + 0.5) / double(R)), 2));
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

}  // namespace

TEST(EvalPredict, ExactWindowPngEqualsDirectForward) {
  at::Tensor rgb = test_image(64, 64, 1);
  Predictor pred = make_predictor();
  Prediction p = pred.predict_bytes(encode_png(rgb), "a.png");
  EXPECT_EQ(p.window, 64);  // from the weights' train_size
  EXPECT_EQ(p.num_windows, 1);
  EXPECT_EQ(p.dct_source, "pixels");
  EXPECT_EQ(p.jpeg_quality, -1);
  Direct d = direct_forward(rgb, pixel_dct(rgb, ones_table()), ones_table());
  ASSERT_EQ(p.prob.sizes(), d.prob.sizes());
  EXPECT_LT(testutil::max_abs_diff(p.prob, d.prob), 1e-6);
  EXPECT_NEAR(p.image_score, d.score, 1e-6);
  EXPECT_EQ(p.decision, d.score > 0.5 ? "tampered" : "pristine");
}

TEST(EvalPredict, ExactWindowJpegUsesFileCoefficients) {
  at::Generator gen = at::detail::createCPUGenerator(2);
  std::vector<uint8_t> jpeg = encode_jpeg(at::randint(0, 256, {64, 64, 3}, gen, at::TensorOptions().dtype(at::kByte)), 85);
  at::Tensor rgb = decode_image_bytes(jpeg, "b.jpg");
  JpegCoefficients jc = read_jpeg_coefficients_bytes(jpeg, "b.jpg");
  Predictor pred = make_predictor();
  Prediction p = pred.predict_bytes(jpeg, "b.jpg");
  EXPECT_EQ(p.dct_source, "file");
  EXPECT_EQ(p.jpeg_quality, 85);
  Direct d = direct_forward(rgb, clip_coefficients(jc.coef, 64, 64), jc.qt);
  EXPECT_LT(testutil::max_abs_diff(p.prob, d.prob), 1e-6);
  EXPECT_NEAR(p.image_score, d.score, 1e-6);
  // Forced pixel DCT: coefficients recomputed from the decoded pixels with the file's table.
  Predictor pix = make_predictor(2, 0, "pixels");
  Prediction q = pix.predict_bytes(jpeg, "b.jpg");
  EXPECT_EQ(q.dct_source, "pixels");
  Direct e = direct_forward(rgb, pixel_dct(rgb, jc.qt), jc.qt);
  EXPECT_LT(testutil::max_abs_diff(q.prob, e.prob), 1e-6);
  // Saturated colour noise: decoding clamps RGB, so the pixel DCT differs from the file's and the two
  // paths really are different inputs here (otherwise this test could not tell them apart).
  ASSERT_GT(testutil::max_abs_diff(clip_coefficients(jc.coef, 64, 64), pixel_dct(rgb, jc.qt)), 0.0);
  EXPECT_GT(testutil::max_abs_diff(p.prob, q.prob), 0.0);
}

TEST(EvalPredict, WindowsAreMaxMergedOnAWhitePaddedCanvas) {
  // 70 x 77 -> canvas 72 x 80 (white right/bottom padding); R 64, stride 32:
  // origins y {0, 8} (the last one shifted back to the border), x {0, 16}.
  at::Tensor rgb = test_image(70, 77, 3);
  at::Tensor canvas = at::full({72, 80, 3}, 255, at::kByte);
  canvas.slice(0, 0, 70).slice(1, 0, 77).copy_(rgb);
  at::Tensor dct = pixel_dct(canvas, ones_table());
  at::Tensor merged = at::zeros({72, 80}, at::kFloat);
  double score = 0;
  for (int64_t y : {0, 8})
    for (int64_t x : {0, 16}) {
      Direct d = direct_forward(canvas.slice(0, y, y + 64).slice(1, x, x + 64),
                                dct.slice(0, y, y + 64).slice(1, x, x + 64), ones_table());
      at::Tensor dst = merged.slice(0, y, y + 64).slice(1, x, x + 64);
      dst.copy_(at::maximum(dst, d.prob));
      score = std::max(score, d.score);
    }
  at::Tensor want = merged.slice(0, 0, 70).slice(1, 0, 77);
  for (int64_t batch : {1, 3, 0}) {  // 0: the automatic batch (all four windows at once here)
    Predictor pred = make_predictor(batch, 32, "auto", "max");
    Prediction p = pred.predict_rgb(rgb, {}, "c");
    EXPECT_EQ(p.num_windows, 4);
    ASSERT_EQ(p.prob.sizes(), want.sizes());
    EXPECT_LT(testutil::max_abs_diff(p.prob, want), 1e-5) << "batch " << batch;
    EXPECT_NEAR(p.image_score, score, 1e-5);
  }
}

// --batch 0: as many windows as hold 8 * 256^2 pixels, at least one; an explicit batch is kept.
TEST(EvalPredict, AutomaticBatchHoldsEightWindowsOf256) {
  const std::vector<std::pair<int64_t, int64_t>> want = {{64, 128}, {256, 8}, {512, 2}, {736, 1}, {1024, 1}};
  for (auto [window, batch] : want) {
    PredictOptions opt;
    opt.window = window;
    EXPECT_EQ(Predictor(load_weights(tiny_model().path), opt).batch(), batch) << "window " << window;
    opt.batch = 3;
    EXPECT_EQ(Predictor(load_weights(tiny_model().path), opt).batch(), 3);
  }
}

TEST(EvalPredict, WindowsAreBlendedWithRaisedCosineWeights) {
  // Same image and windows as above; the map is sum(w p) / sum(w) with the weights computed here.
  at::Tensor rgb = test_image(70, 77, 3);
  at::Tensor canvas = at::full({72, 80, 3}, 255, at::kByte);
  canvas.slice(0, 0, 70).slice(1, 0, 77).copy_(rgb);
  at::Tensor dct = pixel_dct(canvas, ones_table());
  at::Tensor num = at::zeros({72, 80}, at::kDouble), den = at::zeros({72, 80}, at::kDouble);
  double score = 0;
  for (int64_t y : {0, 8})
    for (int64_t x : {0, 16}) {
      Direct d = direct_forward(canvas.slice(0, y, y + 64).slice(1, x, x + 64),
                                dct.slice(0, y, y + 64).slice(1, x, x + 64), ones_table());
      at::Tensor w = at::zeros({64, 64}, at::kDouble);
      for (int64_t i = 0; i < 64; ++i)
        for (int64_t j = 0; j < 64; ++j) w[i][j] = test_weight(i, 64, y, 72) * test_weight(j, 64, x, 80);
      num.slice(0, y, y + 64).slice(1, x, x + 64) += w * d.prob.to(at::kDouble);
      den.slice(0, y, y + 64).slice(1, x, x + 64) += w;
      score = std::max(score, d.score);
    }
  at::Tensor want = (num / den).slice(0, 0, 70).slice(1, 0, 77).to(at::kFloat);
  Predictor pred = make_predictor(3, 32);
  Prediction p = pred.predict_rgb(rgb, {}, "c");
  EXPECT_EQ(p.merge, "blend");
  EXPECT_LT(testutil::max_abs_diff(p.prob, want), 1e-5);
  EXPECT_NEAR(p.window_max, score, 1e-5);
  // No calibration in these weights: the page score is the uncalibrated max over windows.
  EXPECT_EQ(p.score_kind, "uncalibrated");
  EXPECT_NEAR(p.image_score, score, 1e-5);
  // Default stride for blending: R/2.
  EXPECT_EQ(make_predictor().predict_rgb(rgb, {}, "c").stride, 32);
  EXPECT_EQ(make_predictor(2, 0, "auto", "max").predict_rgb(rgb, {}, "c").stride, 64);
}

TEST(EvalPredict, CalibrationFromMetadataIsApplied) {
  // p = sigmoid(3 * cls_max - 1) (identity transform), cls_max = the max of softmax(cls)[1] over the
  // windows that hold content: here every window (a textured page), so it is the direct forwards' max.
  const std::string w = calibrated_weights({{"statistic", "cls_max"}, {"transform", "identity"}, {"a", 3.0}, {"b", -1.0}}, "a");
  LoadedModel lm = load_weights(w);
  ASSERT_TRUE(lm.calibration.has_value());
  EXPECT_EQ(lm.calibration->statistic, "cls_max");
  EXPECT_EQ(lm.calibration->a, 3.0);
  PredictOptions opt;
  opt.stride = 64;
  Predictor pred(std::move(lm), opt);
  at::Tensor rgb = test_image(128, 64, 21);
  Prediction p = pred.predict_rgb(rgb, {}, "d");
  at::Tensor dct = pixel_dct(rgb, ones_table());
  double cls_max = 0;
  for (int64_t y : {0, 64}) cls_max = std::max(cls_max, direct_forward(rgb.slice(0, y, y + 64), dct.slice(0, y, y + 64), ones_table()).score);
  EXPECT_EQ(p.page_stats.content_windows, 2);
  EXPECT_NEAR(p.page_stats.cls_max, cls_max, 1e-6);
  EXPECT_EQ(p.score_kind, "calibrated");
  EXPECT_NEAR(p.image_score, 1.0 / (1.0 + std::exp(-(3.0 * cls_max - 1.0))), 1e-6);
  EXPECT_EQ(p.decision, p.image_score > 0.5 ? "tampered" : "pristine");
  nlohmann::json j = prediction_to_json(p);
  EXPECT_EQ(j["score_kind"], "calibrated");
  EXPECT_NEAR(j["page_stats"]["cls_max"].get<double>(), cls_max, 1e-6);
  // --score window-max ignores the calibration (the Syn2Real rule).
  PredictOptions wm = opt;
  wm.score = "window-max";
  Prediction q = Predictor(load_weights(w), wm).predict_rgb(rgb, {}, "d");
  EXPECT_EQ(q.score_kind, "uncalibrated");
  EXPECT_NEAR(q.image_score, cls_max, 1e-6);
  // Broken calibration metadata is an error naming the file.
  const std::string bad = calibrated_weights({{"statistic", "q42"}, {"a", 1}, {"b", 0}}, "bad");
  EXPECT_THROW(load_weights(bad), Error);
}

TEST(EvalPredict, PageDecisionUsesTheCalibrationsThreshold) {
  // p = sigmoid(3 * cls_max - 1) lies in (0.26, 0.89) for any cls_max in [0, 1]: a stored threshold of
  // 0.95 must make the page pristine, 0.1 tampered, whatever the model says; an explicit page_threshold
  // overrides the stored one; regions keep the pixel threshold.
  at::Tensor rgb = test_image(128, 64, 21);
  nlohmann::json cal = {{"statistic", "cls_max"}, {"transform", "identity"}, {"a", 3.0}, {"b", -1.0}};
  PredictOptions opt;
  opt.stride = 64;
  cal["threshold"] = 0.95;
  Predictor high(load_weights(calibrated_weights(cal, "th")), opt);
  EXPECT_EQ(high.page_threshold(), 0.95);
  Prediction p = high.predict_rgb(rgb, {}, "d");
  ASSERT_GT(p.image_score, 0.26);
  ASSERT_LT(p.image_score, 0.89);
  EXPECT_EQ(p.decision, "pristine");
  nlohmann::json j = prediction_to_json(p);
  EXPECT_EQ(j["page_threshold"].get<double>(), 0.95);
  EXPECT_EQ(j["threshold"].get<double>(), 0.5);
  cal["threshold"] = 0.1;
  const std::string low_w = calibrated_weights(cal, "tl");
  EXPECT_EQ(Predictor(load_weights(low_w), opt).predict_rgb(rgb, {}, "d").decision, "tampered");
  PredictOptions over = opt;
  over.page_threshold = 0.9;
  Prediction o = Predictor(load_weights(low_w), over).predict_rgb(rgb, {}, "d");
  EXPECT_EQ(o.decision, "pristine");
  EXPECT_EQ(o.page_threshold, 0.9);
  // The window-max score is not the calibrated probability: its threshold is 0.5, not the stored one.
  PredictOptions wm = opt;
  wm.score = "window-max";
  EXPECT_EQ(Predictor(load_weights(low_w), wm).page_threshold(), 0.5);
  // Weights without a stored threshold decide at 0.5; a stored threshold outside [0, 1) is an error.
  cal.erase("threshold");
  EXPECT_EQ(Predictor(load_weights(calibrated_weights(cal, "tn")), opt).page_threshold(), 0.5);
  cal["threshold"] = 1.5;
  EXPECT_THROW(load_weights(calibrated_weights(cal, "tb")), Error);
  over.page_threshold = 1.0;
  EXPECT_THROW(Predictor(load_weights(low_w), over), Error);
}

TEST(EvalPredict, CalibrateSetsTheDecisionThresholdFromUntouchedPages) {
  // Hand-made statistics: untouched q999 0.2 0.3 0.88 0.9, tampered 0.6 0.8 0.95 0.97. With --false-alarm
  // 0.25, one of the four untouched pages may lie above the threshold: it is the calibrated score of the
  // second highest untouched page (0.88), or 0.5 if that is lower (as with 0.5: the third, 0.3); with 0
  // it is the highest (0.9).
  const std::string dir = testutil::temp_dir("calibrate-threshold");
  {
    std::ofstream f(dir + "/stats.jsonl");
    const std::vector<std::pair<double, int>> pages = {{0.2, 0}, {0.3, 0}, {0.88, 0}, {0.9, 0},
                                                       {0.6, 1}, {0.8, 1}, {0.95, 1}, {0.97, 1}};
    for (auto [q, label] : pages)
      f << nlohmann::json{{"label", label}, {"page_stats", {{"q99", q}, {"q999", q}, {"cls_max", q}, {"cls_mean", q}}}}.dump()
        << "\n";
  }
  const std::string base = calibrated_weights({{"statistic", "q999"}, {"a", 1.0}, {"b", 0.0}}, "cal-base");
  auto logit = [](double p) { return std::log(p / (1 - p)); };
  const std::vector<double> untouched = {0.2, 0.3, 0.88, 0.9};
  for (auto [alarm, raw, may_be_above] : std::vector<std::tuple<std::string, double, int>>{{"0.25", 0.88, 1}, {"0", 0.9, 0}, {"0.5", 0.3, 2}}) {
    const std::string out = dir + "/w-" + alarm + ".safetensors";
    testutil::CliResult r = testutil::run_cli("calibrate -q --json --statistic q999 --from-stats '" + dir +
                                              "/stats.jsonl' --weights '" + base + "' --false-alarm " + alarm + " --out '" + out + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json cal = nlohmann::json::parse(r.out)["calibration"];
    const double a = cal["a"].get<double>(), b = cal["b"].get<double>();
    ASSERT_GT(a, 0);
    const double want = std::max(0.5, 1 / (1 + std::exp(-(a * logit(raw) + b))));  // 0.613, 0.647, 0.5
    EXPECT_NEAR(cal["threshold"].get<double>(), want, 1e-12) << alarm;
    int above = 0;
    for (double q : untouched) above += 1 / (1 + std::exp(-(a * logit(q) + b))) > want;
    EXPECT_LE(above, may_be_above) << alarm;
    EXPECT_EQ(cal["fit"]["untouched_above_threshold"].get<int>(), above) << alarm;
    EXPECT_NEAR(load_weights(out).calibration->threshold, want, 1e-12);
  }
  EXPECT_NE(testutil::run_cli("calibrate -q --from-stats '" + dir + "/stats.jsonl' --weights '" + base + "' --false-alarm 1").exit_code, 0);
}

TEST(EvalPredict, CalibrateAutoChoosesOnlySizeInvariantStatistics) {
  // Hand-made statistics of 4 untouched and 4 tampered pages. cls_max separates them perfectly (AUC 1),
  // but it is a maximum over windows and grows with the page's size, so `auto` must not take it. AUCs by
  // hand (pairs tampered > untouched, ties 1/2, of 16): q999 13/16 = 0.8125, cls_mean 9/16 = 0.5625,
  // q99 8/16 = 0.5 (the same four values in both classes: 0 + 1.5 + 2.5 + 3.5 pairs, ties counted 1/2).
  const std::string dir = testutil::temp_dir("calibrate-auto");
  {
    std::ofstream f(dir + "/stats.jsonl");
    const std::vector<double> q999 = {0.2, 0.3, 0.5, 0.7, 0.4, 0.6, 0.8, 0.9};
    const std::vector<double> q99 = {0.5, 0.6, 0.7, 0.8, 0.5, 0.6, 0.7, 0.8};
    const std::vector<double> cls_max = {0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9};
    const std::vector<double> cls_mean = {0.1, 0.5, 0.6, 0.7, 0.2, 0.3, 0.65, 0.9};
    for (size_t i = 0; i < 8; ++i)
      f << nlohmann::json{{"label", i < 4 ? 0 : 1},
                          {"page_stats", {{"q99", q99[i]}, {"q999", q999[i]}, {"cls_max", cls_max[i]}, {"cls_mean", cls_mean[i]}}}}
               .dump()
        << "\n";
  }
  const std::string base = calibrated_weights({{"statistic", "q999"}, {"a", 1.0}, {"b", 0.0}}, "auto-base");
  testutil::CliResult r = testutil::run_cli("calibrate -q --json --from-stats '" + dir + "/stats.jsonl' --weights '" + base + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["calibration"]["statistic"], "q999");
  EXPECT_NEAR(j["calibration"]["fit"]["auc"].get<double>(), 13.0 / 16, 1e-12);
  std::map<std::string, double> auc;
  for (const auto& c : j["candidates"]) auc[c["statistic"].get<std::string>()] = c["auc"].get<double>();
  EXPECT_EQ(auc.size(), 3u);
  EXPECT_EQ(auc.count("cls_max"), 0u);
  EXPECT_NEAR(auc["q99"], 0.5, 1e-12);
  EXPECT_NEAR(auc["cls_mean"], 9.0 / 16, 1e-12);
  // Asked for by name, cls_max is still fitted and kept.
  r = testutil::run_cli("calibrate -q --json --statistic cls_max --from-stats '" + dir + "/stats.jsonl' --weights '" + base + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["calibration"]["statistic"], "cls_max");
  EXPECT_NEAR(j["calibration"]["fit"]["auc"].get<double>(), 1.0, 1e-12);
}

TEST(EvalPredict, PageScoreAndMapIgnoreWhiteMarginsAndTiling) {
  // A 128 x 128 page, the same page inside a white margin (offset a multiple of the stride, so the
  // windows over the page see the same pixels), and the page tiled 2 x 2. The calibration is steep
  // (a = 8 on the logit of q999) so that a raw-statistic change shows in the score.
  const std::string w = calibrated_weights({{"statistic", "q999"}, {"transform", "logit"}, {"a", 8.0}, {"b", 0.0}}, "m");
  Predictor pred(load_weights(w), PredictOptions{});
  at::Tensor page = test_image(128, 128, 31);
  Prediction base = pred.predict_rgb(page, {}, "page");
  at::Tensor margin = at::full({320, 384, 3}, 255, at::kByte);
  margin.slice(0, 64, 192).slice(1, 96, 224).copy_(page);
  Prediction m = pred.predict_rgb(margin, {}, "margin");
  at::Tensor tiled = page.repeat({2, 2, 1});
  Prediction t = pred.predict_rgb(tiled, {}, "tiled");
  EXPECT_EQ(m.num_windows, 99);
  EXPECT_NEAR(m.image_score, base.image_score, 0.05) << "raw " << m.page_stats.q999 << " vs " << base.page_stats.q999;
  EXPECT_NEAR(t.image_score, base.image_score, 0.05) << "raw " << t.page_stats.q999 << " vs " << base.page_stats.q999;
  EXPECT_NEAR(m.page_stats.content_fraction * 320 * 384, 128.0 * 128, 1.0) << "the margin is not content";
  // The map over the page: the same inside (windows fully on the page see the same pixels); near the
  // page's border the windows see white margin instead of white padding, so allow a small mean change.
  at::Tensor mp = m.prob.slice(0, 64, 192).slice(1, 96, 224);
  EXPECT_LT((mp - base.prob).abs().mean().item<double>(), 0.02);
  EXPECT_LT((t.prob.slice(0, 0, 128).slice(1, 0, 128) - base.prob).abs().mean().item<double>(), 0.02);
  // A window-max score over all windows (the old page score) is what margins used to move.
  EXPECT_GE(m.window_max, base.window_max - 1e-6);
}

TEST(EvalPredict, BlankWindowsAreSkippedWithoutChangingTheScore) {
  // A 512 x 512 white page with a textured 128 x 128 block at the top-left: content blocks cover
  // [0, 128)^2 (dilation never makes a block of one colour content). Windows of 64 at stride 32 start at
  // 0, 32, ..., 448 (15 a side, 225); a window holds content iff its origin is < 128 on both axes
  // (4 x 4 = 16), so 209 are skipped. The page statistics, the score and the map on content pixels must
  // be those of every window run, up to float rounding (a window's output can change in its last bits
  // with the windows batched beside it, e.g. on the BLAS linear path); blank pixels far from content get 0.
  const std::string w = calibrated_weights({{"statistic", "q999"}, {"transform", "logit"}, {"a", 8.0}, {"b", 0.0}}, "skip");
  at::Tensor page = at::full({512, 512, 3}, 255, at::kByte);
  page.slice(0, 0, 128).slice(1, 0, 128).copy_(test_image(128, 128, 41));
  PredictOptions opt;
  opt.stride = 32;
  Prediction s = Predictor(load_weights(w), opt).predict_rgb(page, {}, "skip");
  opt.skip_blank = false;
  Prediction a = Predictor(load_weights(w), opt).predict_rgb(page, {}, "all");
  EXPECT_EQ(s.num_windows, 225);
  EXPECT_EQ(s.skipped_windows, 209);
  EXPECT_EQ(a.skipped_windows, 0);
  EXPECT_EQ(prediction_to_json(s)["skipped_windows"], 209);
  EXPECT_NEAR(s.image_score, a.image_score, 1e-4);
  EXPECT_NEAR(s.page_stats.q99, a.page_stats.q99, 1.0 / 4096);  // quantiles: one histogram bin
  EXPECT_NEAR(s.page_stats.q999, a.page_stats.q999, 1.0 / 4096);
  EXPECT_NEAR(s.page_stats.cls_max, a.page_stats.cls_max, 1e-5);
  EXPECT_NEAR(s.page_stats.cls_mean, a.page_stats.cls_mean, 1e-5);
  EXPECT_EQ(s.page_stats.content_windows, 16);
  EXPECT_LT(testutil::max_abs_diff(s.prob.slice(0, 0, 128).slice(1, 0, 128), a.prob.slice(0, 0, 128).slice(1, 0, 128)), 1e-5);
  EXPECT_EQ(s.prob.slice(0, 160).abs().max().item<float>(), 0.0f) << "no window run reaches row 160";
  EXPECT_GT(a.prob.slice(0, 160).abs().max().item<float>(), 0.0f);
  // The Syn2Real rule (max-merge) and the uncalibrated score run every window.
  opt.skip_blank = true;
  opt.merge = "max";
  EXPECT_EQ(Predictor(load_weights(w), opt).predict_rgb(page, {}, "max").skipped_windows, 0);
  EXPECT_EQ(make_predictor(2, 32).predict_rgb(page, {}, "uncal").skipped_windows, 0);
}

TEST(EvalPredict, CoarseToFineRunsOverlapWindowsOnlyWhereTheCoarseMapReachesTheLevel) {
  // 192 x 192, R 64, stride 32: origins 0, 32, ..., 128 on each axis (25 windows); the stride-64 grid
  // (origins 0, 64, 128: 9 windows) runs first. Reference computed here: every window's map by a direct
  // forward pass, the coarse map and the final map blended in float64 with this file's weights, a window
  // not run standing in with the blurred coarse map over its area; the level is set in the widest gap
  // between the 16 other windows' coarse maxima, so some run and some not.
  at::Tensor rgb = test_image(192, 192, 57);
  at::Tensor dct = pixel_dct(rgb, ones_table());
  std::map<std::pair<int64_t, int64_t>, Direct> maps;
  const std::vector<int64_t> origins = {0, 32, 64, 96, 128};
  for (int64_t y : origins)
    for (int64_t x : origins)
      maps.emplace(std::make_pair(y, x), direct_forward(rgb.slice(0, y, y + 64).slice(1, x, x + 64),
                                                       dct.slice(0, y, y + 64).slice(1, x, x + 64), ones_table()));
  // The coarse map blurred as documented: Gaussian, sigma R/32 = 2, taps |t| <= 6, edges repeated.
  auto blurred = [](const at::Tensor& m) {
    std::vector<double> k;
    double sum = 0;
    for (int t = -6; t <= 6; ++t) sum += k.emplace_back(std::exp(-t * t / 8.0));
    auto a = m.accessor<double, 2>();
    auto clamp = [](int64_t i) { return std::min<int64_t>(191, std::max<int64_t>(0, i)); };
    at::Tensor rows = at::zeros({192, 192}, at::kDouble), out = at::zeros({192, 192}, at::kDouble);
    auto r = rows.accessor<double, 2>();
    auto o = out.accessor<double, 2>();
    for (int64_t y = 0; y < 192; ++y)
      for (int64_t x = 0; x < 192; ++x)
        for (int t = -6; t <= 6; ++t) r[y][x] += k[size_t(t + 6)] / sum * a[y][clamp(x + t)];
    for (int64_t y = 0; y < 192; ++y)
      for (int64_t x = 0; x < 192; ++x)
        for (int t = -6; t <= 6; ++t) o[y][x] += k[size_t(t + 6)] / sum * r[clamp(y + t)][x];
    return out;
  };
  // Blend of the windows `run` plus each of `stand_in` with `smooth` (the blurred coarse map) as its map.
  using Origins = std::vector<std::pair<int64_t, int64_t>>;
  auto blend = [&](const Origins& run, const Origins& stand_in = {}, const at::Tensor& smooth = {}) {
    at::Tensor num = at::zeros({192, 192}, at::kDouble), den = at::zeros({192, 192}, at::kDouble);
    for (size_t k = 0; k < run.size() + stand_in.size(); ++k) {
      const auto [y, x] = k < run.size() ? run[k] : stand_in[k - run.size()];
      at::Tensor w = at::zeros({64, 64}, at::kDouble);
      for (int64_t i = 0; i < 64; ++i)
        for (int64_t j = 0; j < 64; ++j) w[i][j] = test_weight(i, 64, y, 192) * test_weight(j, 64, x, 192);
      at::Tensor value = k < run.size() ? maps.at({y, x}).prob.to(at::kDouble)
                                        : smooth.slice(0, y, y + 64).slice(1, x, x + 64);
      num.slice(0, y, y + 64).slice(1, x, x + 64) += w * value;
      den.slice(0, y, y + 64).slice(1, x, x + 64) += w;
    }
    return num / den;
  };
  std::vector<std::pair<int64_t, int64_t>> coarse, others;
  for (int64_t y : origins)
    for (int64_t x : origins) (y % 64 == 0 && x % 64 == 0 ? coarse : others).push_back({y, x});
  ASSERT_EQ(coarse.size(), 9u);
  const at::Tensor first = blend(coarse);
  std::vector<double> peaks;
  for (const auto& [y, x] : others) peaks.push_back(first.slice(0, y, y + 64).slice(1, x, x + 64).max().item<double>());
  std::vector<double> sorted = peaks;
  std::sort(sorted.begin(), sorted.end());
  // The widest gap between neighbouring maxima (windows that share a coarse peak share its value).
  size_t gap = 0;
  for (size_t i = 0; i + 1 < sorted.size(); ++i)
    if (sorted[i + 1] - sorted[i] > sorted[gap + 1] - sorted[gap]) gap = i;
  ASSERT_GT(sorted[gap + 1] - sorted[gap], 1e-4) << "the test needs distinct coarse maxima";
  const double level = 0.5 * (sorted[gap] + sorted[gap + 1]);
  std::vector<std::pair<int64_t, int64_t>> run = coarse, stand_in;
  for (size_t i = 0; i < others.size(); ++i) (peaks[i] >= level ? run : stand_in).push_back(others[i]);
  const int64_t cold = int64_t(coarse.size() + others.size() - run.size());
  ASSERT_GT(cold, 0);
  ASSERT_LT(cold, 16);
  double score = 0;
  for (const auto& yx : run) score = std::max(score, maps.at(yx).score);

  PredictOptions opt;
  opt.stride = 32;
  opt.refine = level;
  Prediction p = Predictor(load_weights(tiny_model().path), opt).predict_rgb(rgb, {}, "c2f");
  EXPECT_EQ(p.num_windows, 25);
  EXPECT_EQ(p.cold_windows, cold);
  EXPECT_EQ(p.refine, level);
  EXPECT_EQ(prediction_to_json(p)["refine"], level);
  EXPECT_EQ(prediction_to_json(p)["cold_windows"], cold);
  EXPECT_LT(testutil::max_abs_diff(p.prob, blend(run, stand_in, blurred(first)).to(at::kFloat)), 1e-5);
  EXPECT_NEAR(p.window_max, score, 1e-5);
  // With a core weight c, a window runs only when the coarse map reaches the level where the window's
  // own blend weight (this file's test_weight product) is at least c. The level is the midpoint of the
  // widest gap, among all the windows' plain and core maxima, at which the two rules run different
  // windows (else this part could not tell them apart).
  const double core = 0.25;
  std::vector<double> core_peaks;
  for (const auto& [y, x] : others) {
    at::Tensor a = first.slice(0, y, y + 64).slice(1, x, x + 64).clone();
    auto acc = a.accessor<double, 2>();
    for (int64_t i = 0; i < 64; ++i)
      for (int64_t j = 0; j < 64; ++j)
        if (test_weight(i, 64, y, 192) * test_weight(j, 64, x, 192) < core) acc[i][j] = 0;
    core_peaks.push_back(a.max().item<double>());
  }
  std::vector<double> values = peaks;
  values.insert(values.end(), core_peaks.begin(), core_peaks.end());
  std::sort(values.begin(), values.end());
  double core_level = -1, margin = 0;
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const double l = 0.5 * (values[i] + values[i + 1]);
    bool differ = false;
    for (size_t k = 0; k < others.size(); ++k) differ |= (peaks[k] >= l) != (core_peaks[k] >= l);
    if (differ && values[i + 1] - values[i] > margin) margin = values[i + 1] - values[i], core_level = l;
  }
  ASSERT_GT(margin, 1e-4) << "the test needs a level at which the core rule runs other windows";
  Origins core_run = coarse, core_cold;
  for (size_t k = 0; k < others.size(); ++k) (core_peaks[k] >= core_level ? core_run : core_cold).push_back(others[k]);
  opt.refine = core_level;
  opt.refine_core = core;
  Prediction c = Predictor(load_weights(tiny_model().path), opt).predict_rgb(rgb, {}, "core");
  EXPECT_EQ(c.cold_windows, int64_t(core_cold.size()));
  EXPECT_LT(testutil::max_abs_diff(c.prob, blend(core_run, core_cold, blurred(first)).to(at::kFloat)), 1e-5);
  // The number of windows left cold at every level between two neighbouring maxima.
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    if (values[i + 1] - values[i] < 1e-5) continue;
    opt.refine = 0.5 * (values[i] + values[i + 1]);
    const auto cold_core = std::count_if(core_peaks.begin(), core_peaks.end(), [&](double v) { return v < opt.refine; });
    EXPECT_EQ(Predictor(load_weights(tiny_model().path), opt).predict_rgb(rgb, {}, "lv").cold_windows, cold_core)
        << "level " << opt.refine;
  }
  opt.refine_core = 0;
  // Level 0 runs every window (the plain blend); without overlap or with max-merge there is nothing to refine.
  opt.refine = 0;
  Prediction all = Predictor(load_weights(tiny_model().path), opt).predict_rgb(rgb, {}, "all");
  EXPECT_EQ(all.cold_windows, 0);
  std::vector<std::pair<int64_t, int64_t>> every = coarse;
  every.insert(every.end(), others.begin(), others.end());
  EXPECT_LT(testutil::max_abs_diff(all.prob, blend(every).to(at::kFloat)), 1e-5);
  // No seams: with every overlapping window cold (level 1), the steps where coarse windows meet (rows and
  // columns 63|64, 127|128) are far smaller than in the coarse map alone (stride 64: no overlap).
  auto border_step = [](const at::Tensor& m) {
    double step = 0;
    for (int64_t b : {63, 127})
      step = std::max({step, (m[b + 1] - m[b]).abs().max().item<double>(),
                       (m.select(1, b + 1) - m.select(1, b)).abs().max().item<double>()});
    return step;
  };
  opt.refine = 1.0;
  Prediction none = Predictor(load_weights(tiny_model().path), opt).predict_rgb(rgb, {}, "cold");
  EXPECT_EQ(none.cold_windows, 16);
  opt.refine = 0;
  opt.stride = 64;
  Prediction coarse_only = Predictor(load_weights(tiny_model().path), opt).predict_rgb(rgb, {}, "coarse");
  ASSERT_GT(border_step(coarse_only.prob), 1e-3) << "the test needs window maps that differ where they meet";
  EXPECT_LT(border_step(none.prob), 0.35 * border_step(coarse_only.prob));
  // A stride that does not divide R (24): origins 0, 24, ..., 120 and 128 (7 a side, 49 windows); the
  // coarse pass takes the farthest origin that leaves no gap: 0, 48, 96, 128 (16 windows), so at level 1
  // the other 33 are cold, and every pixel is still covered (the map is nowhere 0).
  opt.refine = 1.0;
  opt.stride = 24;
  Prediction s24 = Predictor(load_weights(tiny_model().path), opt).predict_rgb(rgb, {}, "s24");
  EXPECT_EQ(s24.num_windows, 49);
  EXPECT_EQ(s24.cold_windows, 33);
  EXPECT_GT(s24.prob.min().item<double>(), 0.0);
  opt.stride = 64;
  opt.refine = 0.99;
  Prediction s64 = Predictor(load_weights(tiny_model().path), opt).predict_rgb(rgb, {}, "s64");
  EXPECT_EQ(s64.cold_windows, 0);
  EXPECT_EQ(s64.refine, 0);
  opt.stride = 32;
  opt.merge = "max";
  Prediction mx = Predictor(load_weights(tiny_model().path), opt).predict_rgb(rgb, {}, "max");
  EXPECT_EQ(mx.cold_windows, 0);
  EXPECT_EQ(mx.refine, 0);
  // The default level is the pixel threshold.
  opt = PredictOptions();
  opt.stride = 32;
  opt.threshold = level;
  Prediction def = Predictor(load_weights(tiny_model().path), opt).predict_rgb(rgb, {}, "default");
  EXPECT_EQ(def.refine, level);
  EXPECT_EQ(def.cold_windows, cold);
  for (double bad : {1.5, std::nan("")}) {
    PredictOptions b;
    b.refine = bad;
    EXPECT_THROW(Predictor(load_weights(tiny_model().path), b), Error) << bad;
  }
  for (double bad : {-0.1, 1.5, std::nan("")}) {
    PredictOptions b;
    b.refine_core = bad;
    EXPECT_THROW(Predictor(load_weights(tiny_model().path), b), Error) << bad;
  }
}

// box_reduce against a float64 loop: the mean of the pixels of each f x f block (a block cut by the edge:
// of those it holds), rounded half up; sizes ceil(H / f) x ceil(W / f).
TEST(EvalPredict, BoxReduceAveragesBlocks) {
  at::Generator gen = at::detail::createCPUGenerator(3);
  const at::Tensor rgb = at::randint(0, 256, {11, 13, 3}, gen, at::TensorOptions().dtype(at::kByte));
  auto a = rgb.accessor<uint8_t, 3>();
  for (int64_t f : {1, 2, 3, 4, 13}) {
    const at::Tensor r = box_reduce(rgb, f);
    const int64_t h = (11 + f - 1) / f, w = (13 + f - 1) / f;
    ASSERT_EQ(r.sizes(), (std::vector<int64_t>{h, w, 3})) << f;
    auto ra = r.accessor<uint8_t, 3>();
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t c = 0; c < 3; ++c) {
          double sum = 0;
          int n = 0;
          for (int64_t yy = y * f; yy < std::min<int64_t>(11, (y + 1) * f); ++yy)
            for (int64_t xx = x * f; xx < std::min<int64_t>(13, (x + 1) * f); ++xx) sum += a[yy][xx][c], ++n;
          EXPECT_EQ(int(ra[y][x][c]), int(std::floor(sum / n + 0.5))) << f << " " << y << " " << x << " " << c;
        }
  }
  EXPECT_THROW(box_reduce(rgb, 0), Error);
  EXPECT_THROW(box_reduce(rgb.select(2, 0), 2), Error);
}

// --downscale: the model runs on the reduced page exactly as on that page given as pixels; the map comes
// back at the page's size (bilinear), the regions are found there and the record says the factor.
TEST(EvalPredict, DownscaleRunsTheReducedPageAndMapsBack) {
  const at::Tensor rgb = test_image(150, 190, 9);
  PredictOptions opt;
  opt.threshold = 0.3;
  Prediction small = Predictor(load_weights(tiny_model().path), opt).predict_rgb(box_reduce(rgb, 3), {}, "small");
  opt.downscale = 3;
  Prediction p = Predictor(load_weights(tiny_model().path), opt).predict_rgb(rgb, {}, "page");
  EXPECT_EQ(p.downscale, 3);
  EXPECT_EQ(p.width, 190);
  EXPECT_EQ(p.height, 150);
  EXPECT_TRUE(p.rgb.equal(rgb));
  EXPECT_EQ(p.dct_source, "pixels");
  EXPECT_EQ(p.num_windows, small.num_windows);
  EXPECT_EQ(p.image_score, small.image_score);
  EXPECT_EQ(p.page_stats.q999, small.page_stats.q999);
  ASSERT_EQ(p.prob.sizes(), (std::vector<int64_t>{150, 190}));
  // Bilinear, half-pixel centres, written out: source coordinate (d + 0.5) * (50 / 150) - 0.5, clamped at 0.
  const at::Tensor small_prob = small.prob.to(at::kDouble);
  auto sp = small_prob.accessor<double, 2>();
  auto pp = p.prob.accessor<float, 2>();
  auto src = [](int64_t d, double scale, int64_t n, int64_t* i0, int64_t* i1, double* t) {
    const double s = std::max(0.0, (double(d) + 0.5) * scale - 0.5);
    *i0 = std::min<int64_t>(int64_t(s), n - 1);
    *i1 = std::min<int64_t>(*i0 + 1, n - 1);
    *t = s - double(*i0);
  };
  double worst = 0;
  for (int64_t y = 0; y < 150; ++y)
    for (int64_t x = 0; x < 190; ++x) {
      int64_t y0, y1, x0, x1;
      double ty, tx;
      src(y, 50.0 / 150.0, 50, &y0, &y1, &ty);
      src(x, 64.0 / 190.0, 64, &x0, &x1, &tx);
      const double v = (1 - ty) * ((1 - tx) * sp[y0][x0] + tx * sp[y0][x1]) + ty * ((1 - tx) * sp[y1][x0] + tx * sp[y1][x1]);
      worst = std::max(worst, std::abs(v - double(pp[y][x])));
    }
  EXPECT_LT(worst, 1e-5);
  const std::vector<Region> want = find_regions(p.prob, 0.3, opt.min_region_area, opt.region_gap);
  ASSERT_EQ(p.regions.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(p.regions[i].area, want[i].area) << i;
  EXPECT_EQ(prediction_to_json(p)["downscale"], 3);
  EXPECT_EQ(prediction_to_json(p)["downscale_rule"], "fixed");
  EXPECT_EQ(prediction_to_json(small)["downscale"], 1);
  EXPECT_EQ(prediction_to_json(small)["downscale_rule"], "auto") << "the default";
  for (int64_t bad : {9, -1}) {
    PredictOptions b;
    b.downscale = bad;
    EXPECT_THROW(Predictor(load_weights(tiny_model().path), b), Error) << bad;
  }
}

// The automatic factor, by hand: full size below 3,500 px on the shorter side, 4 below 7,500, else 8.
TEST(EvalPredict, AutoDownscaleRule) {
  for (const auto& [h, w, f] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 1}, {3499, 100000, 1}, {100000, 3499, 1}, {3500, 3500, 4}, {7016, 4961, 4}, {7499, 9000, 4},
           {9000, 7500, 8}, {14032, 9922, 8}})
    EXPECT_EQ(auto_downscale(h, w), f) << h << " x " << w;
  EXPECT_EQ(parse_downscale("auto"), kDownscaleAuto);
  EXPECT_EQ(parse_downscale("3"), 3);
  for (const std::string bad : {"", "0", "9", "10", "-1", " 4", "4 ", "AUTO"}) EXPECT_THROW(parse_downscale(bad), Error) << bad;
  EXPECT_EQ(downscale_setting(kDownscaleAuto), "auto");
  EXPECT_EQ(downscale_setting(5), "5");
}

// A page whose shorter side reaches 3,500 px runs under auto exactly as at --downscale 4, and says so
// (without the warning, which is for such a page run at a fixed factor 1: served, tests/test_web_page.js).
TEST(EvalPredict, AutoDownscaleRunsAFinePageAtAQuarter) {
  const at::Tensor rgb = test_image(3500, 3520, 4);
  PredictOptions fixed4;
  fixed4.downscale = 4;
  const Prediction want = Predictor(load_weights(tiny_model().path), fixed4).predict_rgb(rgb, {}, "page");
  const Prediction p = Predictor(load_weights(tiny_model().path), PredictOptions{}).predict_rgb(rgb, {}, "page");
  EXPECT_EQ(p.downscale, 4);
  EXPECT_TRUE(p.downscale_auto);
  EXPECT_FALSE(want.downscale_auto);
  EXPECT_EQ(p.image_score, want.image_score);
  EXPECT_TRUE(p.prob.equal(want.prob));
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_EQ(p.width, 3520);
  EXPECT_EQ(prediction_to_json(p)["downscale_rule"], "auto");
}

TEST(EvalPredict, HighResolutionWarning) {
  EXPECT_EQ(high_resolution_warning(3499, 5000, 1), "");
  EXPECT_EQ(high_resolution_warning(5000, 3499, 1), "");
  const std::string w = high_resolution_warning(7016, 4961, 1);
  EXPECT_NE(w.find("4961 x 7016"), std::string::npos) << w;
  EXPECT_NE(w.find("--downscale 4"), std::string::npos) << w;
  EXPECT_NE(high_resolution_warning(3500, 3500, 1), "");
  EXPECT_EQ(high_resolution_warning(7016, 4961, 4), "") << "a reduced page gets none";
}

// The black-and-white rule by counting pixels by hand: a white 200 x 200 page (40,000 pixels) with 4,000
// black ones is black and white; grey pixels (luma 128) keep it so while 500 x grey < dark pixels (7 of
// 4,007: 3,500 < 4,007) and end it from there (9 of 4,009: 4,500); print in pure red has luma 76 (ITU-R
// 601: 0.299 x 255), grey by the rule; 39 dark pixels of 40,000 (fewer than 1 in 1,000) are no print.
TEST(EvalPredict, BlackAndWhiteWarning) {
  auto page = [](int64_t black_rows, int64_t grey, std::array<uint8_t, 3> ink = {0, 0, 0}) {
    at::Tensor rgb = at::full({200, 200, 3}, 255, at::kByte);
    for (int c = 0; c < 3; ++c) rgb.slice(0, 10, 10 + black_rows).slice(1, 50, 150).select(2, c).fill_(ink[c]);
    if (grey > 0) rgb.select(0, 190).slice(0, 0, grey).fill_(128);
    return rgb;
  };
  const std::string w = black_and_white_warning(page(40, 0));
  EXPECT_NE(w.find("black-and-white page"), std::string::npos) << w;
  EXPECT_NE(black_and_white_warning(page(40, 7)), "");
  EXPECT_EQ(black_and_white_warning(page(40, 9)), "");
  EXPECT_EQ(black_and_white_warning(page(40, 0, {255, 0, 0})), "") << "red print is grey to the rule";
  EXPECT_NE(black_and_white_warning(page(40, 0, {60, 0, 0})), "") << "luma 18: black";
  EXPECT_EQ(black_and_white_warning(at::full({200, 200, 3}, 255, at::kByte)), "") << "blank page";
  at::Tensor few = at::full({200, 200, 3}, 255, at::kByte);
  few.select(0, 5).slice(0, 0, 39).fill_(0);
  EXPECT_EQ(black_and_white_warning(few), "") << "39 dark pixels of 40,000";
  few.select(0, 5).slice(0, 0, 40).fill_(0);
  EXPECT_NE(black_and_white_warning(few), "") << "40 dark pixels of 40,000";
  // In the record: a black-and-white page gets the warning; a page with grey in its print and a
  // black-and-white page run at a quarter (box averaging makes grey) do not.
  const Prediction p = make_predictor(2, 24).predict_rgb(page(40, 0), {}, "bw");
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0], w);
  EXPECT_EQ(prediction_to_json(p)["warnings"][0], w);
  EXPECT_TRUE(make_predictor(2, 24).predict_rgb(page(40, 9), {}, "grey").warnings.empty());
  PredictOptions quarter;
  quarter.downscale = 4;
  at::Tensor stripes = at::full({256, 256, 3}, 255, at::kByte);
  for (int64_t r = 0; r < 256; r += 4) stripes.select(0, r).fill_(0);  // every 4th row black: grey at 1/4
  EXPECT_NE(black_and_white_warning(stripes), "");
  EXPECT_TRUE(Predictor(load_weights(tiny_model().path), quarter).predict_rgb(stripes, {}, "q").warnings.empty());
}

TEST(EvalPredict, OrientationWarning) {
  // Tags 2..8 each name how viewers show the page; 1 (upright) and values outside 1..8 give none.
  EXPECT_EQ(orientation_warning(1), "");
  EXPECT_EQ(orientation_warning(0), "");
  EXPECT_EQ(orientation_warning(9), "");
  const std::map<int, std::string> shown = {{2, "mirrored left to right"}, {3, "turned 180 degrees"},
                                            {4, "mirrored top to bottom"},  {5, "main diagonal"},
                                            {6, "turned 90 degrees clockwise"}, {7, "other diagonal"},
                                            {8, "turned 90 degrees anticlockwise"}};
  for (const auto& [o, words] : shown) {
    const std::string w = orientation_warning(o);
    EXPECT_EQ(w.rfind("EXIF orientation " + std::to_string(o) + ":", 0), 0u) << w;
    EXPECT_NE(w.find(words), std::string::npos) << w;
  }
}

// The map of the upright page `up` (H, W) placed as the stored page of EXIF orientation o = 6 or 3 holds
// it: o = 6 shows stored pixel (y, x) at (x, Hs - 1 - y) (Hs: stored rows), o = 3 at (H - 1 - y, W - 1 - x).
at::Tensor stored_from_upright(const at::Tensor& up, int o) {
  const int64_t H = up.size(0), W = up.size(1);
  at::Tensor out = o == 6 ? at::empty({W, H}, up.options()) : at::empty({H, W}, up.options());
  auto u = up.accessor<float, 2>();
  auto s = out.accessor<float, 2>();
  for (int64_t y = 0; y < out.size(0); ++y)
    for (int64_t x = 0; x < out.size(1); ++x)
      s[y][x] = o == 6 ? u[x][out.size(0) - 1 - y] : u[H - 1 - y][W - 1 - x];
  return out;
}

TEST(EvalPredict, ExifOrientationRunsThePageAsShown) {
  // Fixtures (tests/data/io/README.md): an upright JPEG and its coefficients turned by jpegtran so that
  // EXIF orientation 6 or 3 shows it upright again. Tagged, the stored page runs as shown: its map, turned
  // back to the stored orientation, is the upright page's map run with the DCT from pixels and the file's
  // table (what a turned page gets), up to the decoders' rounding on turned blocks and chroma.
  const Prediction up = make_predictor(2, 0, "pixels").predict_file(testutil::data_path("io/turn_upright.jpg"));
  Predictor pred = make_predictor();
  PredictOptions stored_opt;
  stored_opt.batch = 2;
  stored_opt.apply_exif_orientation = false;
  Predictor as_stored(load_weights(tiny_model().path), stored_opt);
  for (int o : {6, 3}) {
    const std::string fixture = "io/turn_stored_o" + std::to_string(o) + ".jpg";
    const std::vector<uint8_t> tagged = testutil::jpeg_with_orientation(read_file(testutil::data_path(fixture)), o);
    const at::Tensor expected = stored_from_upright(up.prob, o);
    const Prediction p = pred.predict_bytes(tagged, "t.jpg");
    EXPECT_EQ(p.orientation, o);
    EXPECT_EQ(p.dct_source, "pixels");
    EXPECT_EQ(p.jpeg_quality, 75) << "the table turned back is the IJG q75 one";
    ASSERT_EQ(p.prob.sizes(), expected.sizes()) << o;
    const double diff = testutil::max_abs_diff(p.prob, expected);
    // Measured 5.7e-6 (6) and 7.5e-6 (3); the page run as stored differs by 2.0e-3 and 1.6e-3.
    EXPECT_LT(diff, 1e-4) << o;
    EXPECT_NEAR(p.image_score, up.image_score, 1e-4) << o;
    EXPECT_TRUE(std::find(p.warnings.begin(), p.warnings.end(), orientation_warning(o)) == p.warnings.end());
    EXPECT_EQ(prediction_to_json(p)["orientation"], o);
    // --orientation stored: the page as stored (another map), with the warning, no "orientation" field.
    const Prediction q = as_stored.predict_bytes(tagged, "t.jpg");
    EXPECT_EQ(q.orientation, 1);
    EXPECT_EQ(q.dct_source, "file");
    EXPECT_GT(testutil::max_abs_diff(q.prob, expected), 1e-3) << o;
    EXPECT_TRUE(std::find(q.warnings.begin(), q.warnings.end(), orientation_warning(o)) != q.warnings.end());
    EXPECT_FALSE(prediction_to_json(q).contains("orientation"));
    // eval's entry point (decoded pixels with the file's bytes) turns it too.
    const Prediction r = pred.predict_rgb(decode_image_bytes(tagged, "t.jpg"), tagged, "t.jpg");
    EXPECT_TRUE(at::equal(r.prob, p.prob)) << o;
  }
  // --dct-source file cannot read a turned page: a clear error.
  try {
    make_predictor(2, 0, "file").predict_bytes(
        testutil::jpeg_with_orientation(read_file(testutil::data_path("io/turn_stored_o6.jpg")), 6), "t.jpg");
    ADD_FAILURE() << "--dct-source file ran a turned page";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--dct-source file"), std::string::npos) << e.what();
  }
  // A stored height that is not a multiple of 8, turned 180 degrees: the partial last block row would come
  // first and shift the JPEG's grid, so it is left out of the run (map 0 there); the rest runs.
  const std::vector<uint8_t> jpeg = encode_jpeg(test_image(45, 64, 9), 90);
  const Prediction t = pred.predict_bytes(testutil::jpeg_with_orientation(jpeg, 3), "odd.jpg");
  ASSERT_EQ(t.prob.sizes(), (at::IntArrayRef{45, 64}));
  EXPECT_EQ(t.prob.slice(0, 40).abs().max().item<float>(), 0.0f);
  EXPECT_GT(t.prob.slice(0, 0, 40).min().item<float>(), 0.0f);
  EXPECT_EQ(t.orientation, 3);
  // The CLI: turned by default (the record says so), as stored with --orientation stored (the warning on
  // stderr), anything else refused.
  const std::string dir = testutil::temp_dir("turned-cli"), file = dir + "/t.jpg";
  const std::vector<uint8_t> tagged6 = testutil::jpeg_with_orientation(jpeg, 6);
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(tagged6.data()), std::streamsize(tagged6.size()));
  const std::string cmd = "predict '" + file + "' --weights '" + tiny_model().path + "' --json -q";
  testutil::CliResult c = testutil::run_cli(cmd);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(nlohmann::json::parse(c.out)["orientation"], 6);
  EXPECT_EQ(c.err.find("EXIF orientation"), std::string::npos) << c.err;
  c = testutil::run_cli(cmd + " --orientation stored");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_FALSE(nlohmann::json::parse(c.out).contains("orientation"));
  EXPECT_NE(c.err.find("warning: " + file + ": EXIF orientation 6: "), std::string::npos) << c.err;
  c = testutil::run_cli(cmd + " --orientation upright");
  EXPECT_NE(c.exit_code, 0);
  EXPECT_NE(c.err.find("error: --orientation: expected exif or stored, got 'upright'"), std::string::npos) << c.err;
}

TEST(EvalPredict, BlankPageHasNoSeams) {
  // A white page: every window sees the same pixels. The model's output is not quite constant inside a
  // window (zero padding of the convolutions changes it near the window's edges), so max-merge shows a
  // step at window borders; blending weights those edges ~0, and the largest step between neighbouring
  // pixels is several times smaller (measured 1.7e-4 vs 9.8e-4). The constant-output case (the map is
  // exactly that constant) is EvalBlend.ConstantWindowsGiveAConstantMap. No window holds content.
  Prediction p = make_predictor(2, 24).predict_rgb(at::full({200, 150, 3}, 255, at::kByte), {}, "white");
  Prediction q = make_predictor(2, 24, "auto", "max").predict_rgb(at::full({200, 150, 3}, 255, at::kByte), {}, "white");
  EXPECT_GT(p.num_windows, 20);
  auto max_step = [](const at::Tensor& m) {
    return std::max((m.slice(0, 1) - m.slice(0, 0, -1)).abs().max().item<double>(),
                    (m.slice(1, 1) - m.slice(1, 0, -1)).abs().max().item<double>());
  };
  ASSERT_GT(max_step(q.prob), 1e-4) << "the test needs window outputs that vary near their edges";
  EXPECT_LT(max_step(p.prob), 0.35 * max_step(q.prob));
  EXPECT_LT((p.prob.max() - p.prob.min()).item<double>(), 0.01);
  EXPECT_EQ(p.page_stats.content_windows, 0);
  EXPECT_EQ(p.page_stats.content_fraction, 0);
  EXPECT_EQ(p.page_stats.q999, 0);
}

TEST(EvalPredict, OptionErrors) {
  PredictOptions bad_window;
  bad_window.window = 100;
  EXPECT_THROW(Predictor(load_weights(tiny_model().path), bad_window), Error);
  Predictor file_dct = make_predictor(2, 0, "file");
  try {
    file_dct.predict_bytes(encode_png(test_image(32, 32, 4)), "x.png");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.png"), std::string::npos);
  }
  EXPECT_THROW(load_weights("/nonexistent/w.safetensors"), Error);
  PredictOptions bad_merge;
  bad_merge.merge = "mean";
  EXPECT_THROW(Predictor(load_weights(tiny_model().path), bad_merge), Error);
  // A bad train_size in the weights is the file's error (not a --window error).
  for (const std::string ts : {"-256", "100", "0", "256px", "99999"}) {
    const std::string path = testutil::temp_dir("bad-train-size") + "/w.safetensors";
    save_model(tiny_model().model, path, at::kFloat, {{"train_size", ts}});
    try {
      load_weights(path);
      ADD_FAILURE() << ts;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": metadata train_size", 0), 0u) << e.what();
    }
  }
}

TEST(EvalPredict, WriterReplacesRecordsAndLeavesNothingHalfWritten) {
  Predictor pred = make_predictor();
  const std::string dir = testutil::temp_dir("writer") + "/out";
  const std::string odd = "odd\xFF" "name.png";  // not UTF-8
  {
    PredictionWriter w(dir);
    for (const std::string& name : std::vector<std::string>{"a.png", "b.png", odd}) {
      Prediction p = pred.predict_bytes(encode_png(test_image(40, 50, 3)), name);
      nlohmann::json rec = w.write(p, prediction_to_json(p), w.base_name(name));
      EXPECT_EQ(rec["outputs"]["prob"], dir + "/" + valid_utf8(file_stem(name)) + ".prob.png");
    }
    EXPECT_EQ(w.base_name("x/a.png"), "a.png") << "stem taken: the file name";
    EXPECT_EQ(w.base_name("y/a.png"), "a.png_2");
    // Pages get "-pN"; a '#' in a plain file's name is part of its name.
    EXPECT_EQ(w.base_name("d/scan.pdf", 3), "scan-p3");
    EXPECT_EQ(w.base_name("e/scan.pdf", 3), "scan.pdf-p3");
    EXPECT_EQ(w.base_name("d/memo#2.png"), "memo#2");
  }
  auto records = [&] {
    std::vector<nlohmann::json> out;
    auto bytes = read_file(dir + "/predictions.jsonl");
    for (const std::string& l : lines(std::string(bytes.begin(), bytes.end()))) out.push_back(nlohmann::json::parse(l));
    return out;
  };
  std::vector<nlohmann::json> r = records();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[2]["file"], "odd\xEF\xBF\xBD" "name.png");
  EXPECT_EQ(r[2]["file_hex"], "6f6464ff6e616d652e706e67");  // "odd", 0xFF, "name.png" byte by byte
  EXPECT_FALSE(r[0].contains("file_hex"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/odd\xFF" "name.prob.png"));
  // A rerun replaces the records of its inputs in place (the odd name too) and keeps the others.
  {
    PredictionWriter w(dir);
    for (const std::string& name : std::vector<std::string>{odd, "c.png", "a.png"}) {
      Prediction p = pred.predict_bytes(encode_png(test_image(40, 50, 4)), name);
      nlohmann::json rec = prediction_to_json(p);
      rec["run"] = 2;
      w.write(p, rec, w.base_name(name));
    }
  }
  r = records();
  ASSERT_EQ(r.size(), 4u);
  std::vector<std::string> files;
  for (const auto& j : r) files.push_back(j["file"]);
  EXPECT_EQ(files, (std::vector<std::string>{"a.png", "b.png", "odd\xEF\xBF\xBD" "name.png", "c.png"}));
  EXPECT_EQ(r[0]["run"], 2);
  EXPECT_FALSE(r[1].contains("run"));
  EXPECT_EQ(r[2]["run"], 2);
  // A fresh writer (eval) starts the file empty.
  { PredictionWriter w(dir, PredictionWriterOptions{true, {}, /*fresh=*/true}); }
  EXPECT_TRUE(records().empty());
  // When the overlay cannot be written (a directory sits at its path) the prob map goes too and no record
  // is stored.
  std::filesystem::create_directories(dir + "/d.overlay.png/blocker");
  {
    PredictionWriter w(dir);
    Prediction p = pred.predict_bytes(encode_png(test_image(40, 50, 5)), "d.png");
    EXPECT_THROW(w.write(p, prediction_to_json(p), "d"), Error);
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/d.prob.png"));
  EXPECT_TRUE(records().empty());
  for (auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

#ifdef DIFFNET_TEST_HAVE_DATA
TEST(EvalPredict, CalibrateFitsStatsAndWritesMetadata) {
  // Hand-made stats: cls_max 0.2 on 10 pages (3 tampered), 0.8 on 10 pages (8 tampered). With the
  // identity transform and no ridge the fit is the closed form (balanced weights: 11 tampered, 9 not):
  // each group's weighted log-odds. Tampered weight 20/22, untouched 20/18.
  std::string dir = testutil::temp_dir("calibrate");
  {
    std::ofstream f(dir + "/stats.jsonl");
    for (int i = 0; i < 20; ++i) {
      const double v = i < 10 ? 0.2 : 0.8;
      const int label = i < 10 ? (i < 3) : (i < 18);
      f << nlohmann::json{{"id", "p" + std::to_string(i)}, {"label", label},
                          {"page_stats", {{"q99", 0.1}, {"q999", 0.1}, {"cls_max", v}, {"cls_mean", v}}}}.dump()
        << "\n";
    }
  }
  testutil::CliResult r = testutil::run_cli("calibrate --from-stats '" + dir + "/stats.jsonl' --weights '" +
                                            tiny_model().path + "' --statistic cls_max --transform identity --l2 0 --out '" +
                                            dir + "/cal.safetensors' --json -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double wp = 20.0 / 22, wn = 20.0 / 18;
  const double lo0 = std::log(3 * wp / (7 * wn)), lo1 = std::log(8 * wp / (2 * wn));
  const double a = (lo1 - lo0) / 0.6, b = lo0 - a * 0.2;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["calibration"]["a"].get<double>(), a, 1e-6);
  EXPECT_NEAR(j["calibration"]["b"].get<double>(), b, 1e-6);
  LoadedModel lm = load_weights(dir + "/cal.safetensors");
  ASSERT_TRUE(lm.calibration.has_value());
  EXPECT_EQ(lm.calibration->statistic, "cls_max");
  EXPECT_NEAR(lm.calibration->a, a, 1e-6);
  EXPECT_NEAR(lm.calibration->apply(0.8), 1.0 / (1.0 + std::exp(-lo1)), 1e-6);
  EXPECT_EQ(lm.train_size, 64) << "other metadata is kept";
  EXPECT_EQ(j["calibration"]["fit"]["refine_core"], 0.0);
  EXPECT_EQ(j["calibration"]["fit"]["downscale"], "1") << "records without a downscale: full size";
  // Statistics of one set computed with two coarse-to-fine core weights, or at two scale settings, are
  // refused; the one setting of a consistent set is recorded in the fit. calibrate_with(fields): four
  // records, record i with the fields fields[i].
  auto calibrate_with = [&](const std::vector<nlohmann::json>& fields) {
    std::ofstream f(dir + "/mixed.jsonl");
    for (int i = 0; i < 4; ++i) {
      nlohmann::json rec{{"id", "c" + std::to_string(i)}, {"label", i % 2}, {"refine", 0.5},
                         {"page_stats", {{"q99", 0.1}, {"q999", 0.1 + 0.2 * i}, {"cls_max", 0.5}, {"cls_mean", 0.5}}}};
      rec.update(fields[i]);
      f << rec.dump() << "\n";
    }
    f.close();
    return testutil::run_cli("calibrate --from-stats '" + dir + "/mixed.jsonl' --weights '" + tiny_model().path +
                             "' --json -q");
  };
  const nlohmann::json core{{"refine_core", 0.25}}, fixed2{{"downscale", 2}, {"downscale_rule", "fixed"}},
      full{{"downscale", 1}}, auto1{{"downscale", 1}, {"downscale_rule", "auto"}},
      auto4{{"downscale", 4}, {"downscale_rule", "auto"}};
  // {records, fit key, the fit's setting}: consistent sets. The pages of an auto run have their own factors.
  for (const auto& [recs, key, want] : std::vector<std::tuple<std::vector<nlohmann::json>, std::string, nlohmann::json>>{
           {{core, core, core, core}, "refine_core", 0.25},
           {{fixed2, fixed2, fixed2, fixed2}, "downscale", "2"},
           {{auto1, auto4, auto1, auto4}, "downscale", "auto"}}) {
    testutil::CliResult same = calibrate_with(recs);
    ASSERT_EQ(same.exit_code, 0) << same.err;
    EXPECT_EQ(nlohmann::json::parse(same.out)["calibration"]["fit"][key], want) << key;
  }
  // Mixed sets: the last record's setting differs.
  for (const std::vector<nlohmann::json>& recs : std::vector<std::vector<nlohmann::json>>{
           {core, core, core, nlohmann::json::object()}, {fixed2, fixed2, fixed2, full}, {auto4, auto1, auto4, full},
           {fixed2, fixed2, fixed2, auto1}}) {
    testutil::CliResult mixed = calibrate_with(recs);
    EXPECT_EQ(mixed.exit_code, 2) << recs.back().dump();
    EXPECT_NE(mixed.err.find("different windows/strides/refine levels/downscales"), std::string::npos) << mixed.err;
  }
  // --data runs the model; labels come from the masks. A set with one class only is an error.
  std::string ds = testutil::temp_dir("calibrate-ds");
  std::filesystem::create_directories(ds + "/images");
  write_png(ds + "/images/a.png", test_image(64, 64, 41));
  testutil::CliResult one = testutil::run_cli("calibrate --data '" + ds + "' --weights '" + tiny_model().path + "' -q");
  EXPECT_EQ(one.exit_code, 2);
  EXPECT_NE(one.err.find("both tampered and untouched"), std::string::npos) << one.err;
}
#endif

// The server's slots: one read of the weights, copies with equal values and storage of their own.
TEST(EvalPredict, CopyModelIsEqualAndIndependent) {
  LoadedModel a = load_weights(tiny_model().path);
  LoadedModel b = copy_model(a);
  EXPECT_EQ(b.source, a.source);
  EXPECT_EQ(b.train_size, a.train_size);
  EXPECT_EQ(b.calibration.has_value(), a.calibration.has_value());
  DiffNet ma(a.model), mb(b.model);
  auto sa = model_state(ma), sb = model_state(mb);
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& [name, t] : sa) EXPECT_TRUE(at::equal(t, sb.at(name))) << name;
  const at::Tensor before = ma->parameters().front().detach().clone();
  {
    torch::NoGradGuard no_grad;
    mb->parameters().front().add_(1.0);
  }
  EXPECT_TRUE(at::equal(ma->parameters().front(), before));  // the original is untouched
  EXPECT_TRUE(at::allclose(mb->parameters().front(), before + 1.0));
}

// The library names fields ("batch: ..."); the CLI names the flag the user typed.
TEST(EvalPredict, CliErrorsNameTheFlag) {
  std::string in = testutil::temp_dir("flag-names");
  write_png(in + "/a.png", test_image(40, 40, 3));
  testutil::CliResult r =
      testutil::run_cli("predict '" + in + "/a.png' --weights '" + tiny_model().path + "' --batch -1 -q");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error: --batch: must be >= 1, or 0 for the automatic batch"), std::string::npos) << r.err;
  r = testutil::run_cli("predict '" + in + "/a.png' --weights '" + tiny_model().path + "' --window 100 -q");
  EXPECT_NE(r.err.find("error: --window: window size 100 must be a positive multiple of 32"), std::string::npos)
      << r.err;
  for (const std::string bad : {"9", "0", "x", "4.0", "Auto"}) {
    r = testutil::run_cli("predict '" + in + "/a.png' --weights '" + tiny_model().path + "' --downscale " + bad + " -q");
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("error: --downscale: expected auto or an integer from 1 to 8, got '" + bad + "'"),
              std::string::npos)
        << r.err;
  }
  // And the flag reaches the record: the page's own size, the factor.
  r = testutil::run_cli("predict '" + in + "/a.png' --weights '" + tiny_model().path + "' --downscale 2 --json -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json rec = nlohmann::json::parse(r.out);
  EXPECT_EQ(rec["downscale"], 2);
  EXPECT_EQ(rec["downscale_rule"], "fixed");
  EXPECT_EQ(rec["width"], 40);
  // By default (auto) a small page runs at full size, and says why.
  r = testutil::run_cli("predict '" + in + "/a.png' --weights '" + tiny_model().path + "' --json -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["downscale"], 1);
  EXPECT_EQ(nlohmann::json::parse(r.out)["downscale_rule"], "auto");
  r = testutil::run_cli("serve --weights '" + tiny_model().path + "' --request-timeout 0 --port 0");
  EXPECT_EQ(r.exit_code, 2);
#ifdef DIFFNET_TEST_HAVE_SERVE
  // A unit suffix of the field (request_timeout_s) is not part of the flag.
  EXPECT_NE(r.err.find("error: --request-timeout: must be > 0"), std::string::npos) << r.err;
#else
  // A build without the service still has the command, which says how to get it.
  EXPECT_NE(r.err.find("error: serve: not in this build (configure with -DDIFFNET_SERVE=ON"), std::string::npos)
      << r.err;
#endif
}

TEST(EvalPredict, CliWritesMapsOverlaysAndRecords) {
  std::string in = testutil::temp_dir("predict-in"), out = testutil::temp_dir("predict-out") + "/o";
  write_png(in + "/a.png", test_image(70, 100, 5));
  write_jpeg(in + "/b.jpg", test_image(48, 64, 6), 90);
  std::ofstream(in + "/bad.jpg") << "not a jpeg";
  std::ofstream(in + "/notes.txt") << "ignored: not an image extension";
  testutil::CliResult r = testutil::run_cli("predict '" + in + "' --weights '" + tiny_model().path + "' --out '" + out +
                                            "' --json -q");
  EXPECT_EQ(r.exit_code, 2) << "one input failed";
  EXPECT_NE(r.err.find("error: " + in + "/bad.jpg"), std::string::npos) << r.err;
  std::vector<std::string> recs = lines(r.out);
  ASSERT_EQ(recs.size(), 2u) << r.out;
  struct Want {
    std::string stem;
    int64_t h, w, windows;
  };
  // a: 70 x 100 -> canvas 72 x 104, default stride R/2 = 32 -> y {0, 8}, x {0, 32, 40}; b: 48 x 64 ->
  // padded to 64 x 64, one window.
  std::vector<Want> wants = {{"a", 70, 100, 6}, {"b", 48, 64, 1}};
  for (size_t i = 0; i < wants.size(); ++i) {
    const Want& w = wants[i];
    nlohmann::json j = nlohmann::json::parse(recs[i]);
    EXPECT_EQ(j["file"], in + "/" + w.stem + (w.stem == "a" ? ".png" : ".jpg"));
    EXPECT_EQ(j["width"], w.w);
    EXPECT_EQ(j["height"], w.h);
    EXPECT_EQ(j["num_windows"], w.windows);
    EXPECT_EQ(j["window"], 64);
    double s = j["image_score"].get<double>();
    EXPECT_GE(s, 0.0);
    EXPECT_LE(s, 1.0);
    EXPECT_EQ(j["decision"], s > 0.5 ? "tampered" : "pristine");
    EXPECT_TRUE(j["regions"].is_array());
    for (const char* t : {"decode", "dct", "model", "total"}) EXPECT_GE(j["timings_ms"][t].get<double>(), 0.0) << t;
    EXPECT_EQ(j["dct_source"], w.stem == "a" ? "pixels" : "file");
    at::Tensor prob = decode_mask(out + "/" + w.stem + ".prob.png");
    EXPECT_EQ(prob.sizes(), (std::vector<int64_t>{w.h, w.w}));
    at::Tensor overlay = decode_image(out + "/" + w.stem + ".overlay.png");
    EXPECT_EQ(overlay.sizes(), (std::vector<int64_t>{w.h, w.w, 3}));
    // Every region's box lies inside the image and its peak shows in the 8-bit map.
    for (const auto& reg : j["regions"]) {
      auto b = reg["bbox"];
      EXPECT_LE(b[0].get<int64_t>() + b[2].get<int64_t>(), w.w);
      EXPECT_LE(b[1].get<int64_t>() + b[3].get<int64_t>(), w.h);
      EXPECT_GE(reg["area"].get<int64_t>(), kDefaultMinRegionArea);
    }
  }
  std::string jsonl(reinterpret_cast<const char*>(read_file(out + "/predictions.jsonl").data()),
                    read_file(out + "/predictions.jsonl").size());
  EXPECT_EQ(lines(jsonl).size(), 2u);

  // The table names each file; a second run replaces its record in predictions.jsonl.
  testutil::CliResult t = testutil::run_cli("predict '" + in + "/a.png' --weights '" + tiny_model().path + "' --out '" +
                                            out + "' --table");
  EXPECT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("regions"), std::string::npos);
  EXPECT_NE(t.out.find(in + "/a.png "), std::string::npos) << "the whole path, not cut: " << t.out;
  auto again = read_file(out + "/predictions.jsonl");
  EXPECT_EQ(lines(std::string(again.begin(), again.end())).size(), 2u);
}

TEST(EvalPredict, CliPredictsEveryPageOfPdfAndTiffFiles) {
  if (!pdf_supported() || !tiff_supported()) GTEST_SKIP() << "built without PDF/TIFF input";
  namespace fs = std::filesystem;
  std::string in = testutil::temp_dir("pages-in"), out = testutil::temp_dir("pages-out") + "/o";
  for (const char* f : {"scan2.pdf", "pages.tif", "doc_q80_420.jpg", "doc_q90_444.jpg"})
    fs::copy_file(testutil::data_path(std::string("io/") + f), in + "/" + f);
  testutil::CliResult r = testutil::run_cli("predict '" + in + "' --weights '" + tiny_model().path + "' --out '" + out +
                                            "' --csv '" + out + ".csv' --json -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> recs = lines(r.out);
  ASSERT_EQ(recs.size(), 8u) << r.out;  // 2 JPEGs, 4 TIFF pages, 2 PDF pages (files sorted by name)
  std::map<std::string, nlohmann::json> by_file;
  for (const auto& line : recs) {
    nlohmann::json j = nlohmann::json::parse(line);
    by_file[j["file"].get<std::string>()] = j;
  }
  for (int i = 1; i <= 4; ++i) {
    const nlohmann::json& j = by_file.at(in + "/pages.tif#" + std::to_string(i));
    EXPECT_EQ(j["page"], i);
    EXPECT_EQ(j["page_source"], "tiff");
    EXPECT_EQ(j["dct_source"], "pixels");
    EXPECT_TRUE(fs::exists(out + "/pages-p" + std::to_string(i) + ".prob.png"));
  }
  EXPECT_FALSE(by_file.at(in + "/doc_q80_420.jpg").contains("page"));
  // Each page of the scanned PDF is its JPEG given directly: same coefficients, so the same map and score.
  const char* jpegs[] = {"doc_q80_420", "doc_q90_444"};
  for (int i = 1; i <= 2; ++i) {
    const nlohmann::json& pdf = by_file.at(in + "/scan2.pdf#" + std::to_string(i));
    const nlohmann::json& jpg = by_file.at(in + "/" + jpegs[i - 1] + ".jpg");
    EXPECT_EQ(pdf["page_source"], "pdf-jpeg");
    EXPECT_EQ(pdf["dct_source"], "file");
    EXPECT_EQ(pdf["jpeg_quality"], jpg["jpeg_quality"]);
    EXPECT_EQ(pdf["image_score"], jpg["image_score"]);
    EXPECT_EQ(pdf["page_stats"], jpg["page_stats"]);
    EXPECT_EQ(pdf["regions"], jpg["regions"]);
    EXPECT_TRUE(read_file(out + "/scan2-p" + std::to_string(i) + ".prob.png") ==
                read_file(out + "/" + jpegs[i - 1] + ".prob.png"))
        << "page " << i << ": the probability maps differ";
  }
  // The CSV names the file and the page in their own columns.
  std::vector<uint8_t> csv = read_file(out + ".csv");
  const std::string text(csv.begin(), csv.end());
  EXPECT_NE(text.find(in + "/scan2.pdf,2,"), std::string::npos) << text;
  EXPECT_NE(text.find(in + "/doc_q80_420.jpg,,"), std::string::npos) << text;
  // A broken PDF is one failed input; the others still run.
  std::ofstream(in + "/broken.pdf") << "%PDF-1.4 nothing else";
  r = testutil::run_cli("predict '" + in + "/broken.pdf' '" + in + "/doc_q80_420.jpg' --weights '" + tiny_model().path +
                        "' --json -q");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error: " + in + "/broken.pdf"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 of 2 input(s) failed"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.out).size(), 1u);
}

// A born-digital PDF page (text and vectors only) is predicted, with a warning in its record and on stderr;
// a page that an image covers (img2pdf's) gets none.
TEST(EvalPredict, CliWarnsOnBornDigitalPdfPages) {
  if (!pdf_supported()) GTEST_SKIP() << "built without PDF input";
  const std::string text = testutil::data_path("io/text.pdf"), image = testutil::data_path("io/png.pdf");
  const std::string csv_path = testutil::temp_dir("born-digital") + "/r.csv";
  testutil::CliResult r = testutil::run_cli("predict '" + text + "' '" + image + "' --weights '" + tiny_model().path +
                                            "' --pdf-dpi 96 --json -q --csv '" + csv_path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> recs = lines(r.out);
  ASSERT_EQ(recs.size(), 2u) << r.out;
  const nlohmann::json t = nlohmann::json::parse(recs[0]), i = nlohmann::json::parse(recs[1]);
  EXPECT_EQ(t["file"], text + "#1");
  EXPECT_EQ(t["page_source"], "pdf-render");
  ASSERT_EQ(t["warnings"].size(), 1u) << t.dump();
  EXPECT_EQ(t["warnings"][0], kBornDigitalWarning);
  EXPECT_NE(r.err.find("warning: " + text + "#1: born-digital page"), std::string::npos) << r.err;
  EXPECT_EQ(i["page_source"], "pdf-render");
  EXPECT_TRUE(i["warnings"].empty()) << i.dump();
  EXPECT_EQ(r.err.find("warning: " + image), std::string::npos) << r.err;
  // The CSV's last column holds the warning (quoted: it has commas and quotes), empty for the other page.
  std::vector<uint8_t> csv = read_file(csv_path);
  const std::string csv_text(csv.begin(), csv.end());
  std::string quoted = kBornDigitalWarning;
  for (size_t at = quoted.find('"'); at != std::string::npos; at = quoted.find('"', at + 2)) quoted.insert(at, "\"");
  EXPECT_NE(csv_text.find(text + ",1,"), std::string::npos) << csv_text;
  EXPECT_NE(csv_text.find(",\"" + quoted + "\"\r\n"), std::string::npos) << csv_text;
  EXPECT_NE(csv_text.find(image + ",1,"), std::string::npos) << csv_text;
}

TEST(EvalPredict, DefaultWeightsLookup) {
  setenv("DIFFNET_WEIGHTS", "/nonexistent/w.safetensors", 1);
  EXPECT_EQ(default_weights_path(), "/nonexistent/w.safetensors");
  EXPECT_THROW(load_weights(""), Error);  // named explicitly, so its absence is an error
  unsetenv("DIFFNET_WEIGHTS");
  // Installed location first (this test binary's <prefix>/share/...), then the source tree's.
  const std::vector<std::string> c = default_weights_candidates();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_NE(c[0].find("/share/diffnet/weights/diffnet-atto.safetensors"), std::string::npos) << c[0];
  EXPECT_EQ(c[1], testutil::source_path("weights/diffnet-atto.safetensors"));
  EXPECT_THROW(choose_weights(tiny_model().path, true), Error);  // a file and random weights

  // Random weights only when asked for, with a warning; with a weights file that is an error.
  std::string in = testutil::temp_dir("predict-rand");
  write_png(in + "/p.png", test_image(40, 40, 7));
  testutil::CliResult r = testutil::run_cli("predict '" + in + "/p.png' --random-weights --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("random weights (an untrained atto model): results are meaningless"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["window"], 512);  // no train_size: the default window
  r = testutil::run_cli("predict '" + in + "/p.png' --random-weights --weights '" + tiny_model().path + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("exclude each other"), std::string::npos) << r.err;

  // An installed copy (<prefix>/bin/diffnet) finds <prefix>/share/diffnet/weights/ before the source
  // tree's: the tiny model's train_size 64 shows which file was read.
  const std::string prefix = testutil::temp_dir("install-prefix");
  std::filesystem::create_directories(prefix + "/bin");
  std::filesystem::create_directories(prefix + "/share/diffnet/weights");
  std::filesystem::copy_file(DIFFNET_CLI, prefix + "/bin/diffnet");
  std::filesystem::permissions(prefix + "/bin/diffnet", std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add);
  std::filesystem::copy_file(tiny_model().path, prefix + "/share/diffnet/weights/diffnet-atto.safetensors");
  const testutil::CliResult inst =
      testutil::run_command("'" + prefix + "/bin/diffnet' predict '" + in + "/p.png' --json");
  ASSERT_EQ(inst.exit_code, 0) << inst.err;
  EXPECT_EQ(nlohmann::json::parse(inst.out)["window"], 64) << inst.out;
}

#ifdef DIFFNET_TEST_HAVE_DATA
TEST(EvalPredict, EvalOnADatasetMatchesScoreOnItsSavedMaps) {
  // images/ + masks/: t1 tampered (12 x 10 block), t2 pristine (no mask file), t3 mask of zeros.
  std::string ds = testutil::temp_dir("eval-ds");
  std::filesystem::create_directories(ds + "/images");
  std::filesystem::create_directories(ds + "/masks");
  write_png(ds + "/images/t1.png", test_image(40, 72, 11));
  at::Tensor m1 = at::zeros({40, 72}, at::kByte);
  m1.slice(0, 5, 15).slice(1, 20, 32).fill_(255);
  write_png(ds + "/masks/t1.png", m1);
  write_jpeg(ds + "/images/t2.jpg", test_image(64, 64, 12), 80);
  write_png(ds + "/images/t3.png", test_image(33, 50, 13));
  write_png(ds + "/masks/t3.png", at::zeros({33, 50}, at::kByte));
  std::string pred = testutil::temp_dir("eval-pred");
  testutil::CliResult e = testutil::run_cli("eval --weights '" + tiny_model().path + "' --data '" + ds +
                                            "' --protocol doc --json -q --save-pred '" + pred + "'");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  nlohmann::json je = nlohmann::json::parse(e.out);
  EXPECT_EQ(je["protocol"], "doc");
  EXPECT_EQ(je["num_images"], 3);
  EXPECT_EQ(je["num_tampered"], 1);
  EXPECT_EQ(je["pixel_tp"].get<int64_t>() + je["pixel_fn"].get<int64_t>(), 120);  // the 12 x 10 block
  EXPECT_EQ(je["pixel_tp"].get<int64_t>() + je["pixel_fp"].get<int64_t>() + je["pixel_fn"].get<int64_t>() +
                je["pixel_tn"].get<int64_t>(),
            40 * 72 + 64 * 64 + 33 * 50);
  for (const char* stem : {"t1", "t2", "t3"}) EXPECT_TRUE(std::filesystem::exists(pred + "/" + stem + ".prob.png"));
  // `diffnet score` on the saved maps with the saved image scores gives the same numbers (t2 has no
  // mask file: score needs an explicit all-zero mask, written here).
  write_png(ds + "/masks/t2.png", at::zeros({64, 64}, at::kByte));
  testutil::CliResult s = testutil::run_cli("score --pred '" + pred + "' --gt '" + ds + "' --scores '" + pred +
                                            "/predictions.jsonl' --protocol doc --json -q");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  nlohmann::json js = nlohmann::json::parse(s.out);
  for (const char* k : {"pixel_tp", "pixel_fp", "pixel_fn", "pixel_tn", "image_tp", "image_fp", "image_fn", "image_tn"})
    EXPECT_EQ(je[k], js[k]) << k;
  for (const char* k : {"pixel_f1", "doc_f1", "image_f1"}) EXPECT_NEAR(je[k].get<double>(), js[k].get<double>(), 1e-6) << k;
}
#endif
