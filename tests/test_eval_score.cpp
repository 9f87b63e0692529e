// `diffnet score` end to end on tiny PNG fixtures with hand-known TP/FP/FN.
#include <filesystem>
#include <fstream>

#include "diffnet/common.h"
#include "diffnet/eval.h"
#include "diffnet/image_io.h"
#include "testing.h"

using namespace diffnet;

namespace {

at::Tensor u8(std::vector<std::vector<int>> rows) {
  at::Tensor t = at::zeros({int64_t(rows.size()), int64_t(rows[0].size())}, at::kByte);
  for (size_t y = 0; y < rows.size(); ++y)
    for (size_t x = 0; x < rows[y].size(); ++x) t[int64_t(y)][int64_t(x)] = rows[y][x];
  return t;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// a: tampered 2x2 top-left; pred TP 3, FN 1, FP 1; score max 255 -> 1.0.
// b: pristine 3x2; pred FP 1 (128 > 127; 100 is not); score 128/255 = 0.502 > 0.5.
// c: tampered 2x2 everywhere; pred 60 -> FN 4; score 60/255 = 0.235.
struct Fixture {
  std::string pred, gt;
  Fixture() {
    pred = testutil::temp_dir("score-pred");
    gt = testutil::temp_dir("score-gt");
    write_png(gt + "/a.png", u8({{255, 255, 0, 0}, {255, 255, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}));
    write_png(pred + "/a.prob.png", u8({{200, 128, 0, 0}, {127, 255, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 130}}));
    write_png(gt + "/b.png", u8({{0, 0}, {0, 0}, {0, 0}}));
    write_png(pred + "/b.png", u8({{0, 100}, {128, 0}, {0, 0}}));  // plain <stem>.png is accepted too
    write_png(gt + "/c.png", u8({{1, 1}, {1, 1}}));                  // any non-zero value is tampered
    write_png(pred + "/c.prob.png", u8({{60, 60}, {60, 60}}));
  }
};

nlohmann::json run_json(const std::string& args) {
  testutil::CliResult r = testutil::run_cli("score " + args + " --json -q");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST(EvalScore, Syn2RealAndDocEndToEnd) {
  Fixture f;
  nlohmann::json j = run_json("--pred '" + f.pred + "' --gt '" + f.gt + "' --protocol syn2real");
  EXPECT_EQ(j["protocol"], "syn2real");
  EXPECT_EQ(j["num_images"], 3);
  EXPECT_EQ(j["num_tampered"], 2);
  EXPECT_EQ(j["pixel_tp"], 3);
  EXPECT_EQ(j["pixel_fp"], 2);
  EXPECT_EQ(j["pixel_fn"], 5);
  EXPECT_EQ(j["pixel_tn"], 16);
  EXPECT_NEAR(j["pixel_precision"].get<double>(), 3.0 / 5.0, 1e-7);
  EXPECT_NEAR(j["pixel_recall"].get<double>(), 3.0 / 8.0, 1e-7);
  EXPECT_NEAR(j["pixel_f1"].get<double>(), 6.0 / 13.0, 1e-7);
  EXPECT_NEAR(j["pixel_iou"].get<double>(), 3.0 / 10.0, 1e-7);
  // Image level from the maps' maxima: a TP, b FP, c FN.
  EXPECT_EQ(j["image_tp"], 1);
  EXPECT_EQ(j["image_fp"], 1);
  EXPECT_EQ(j["image_fn"], 1);
  EXPECT_EQ(j["image_tn"], 0);
  EXPECT_NEAR(j["image_f1"].get<double>(), 0.5, 1e-7);
  EXPECT_NEAR(j["image_auc"].get<double>(), 0.5, 1e-12);  // positives {1.0, 0.235} vs negative {0.502}
  // Doc: a P 3/4 R 3/4 F1 3/4; c F1 0 -> mean 0.375.
  EXPECT_NEAR(j["doc_f1"].get<double>(), 0.375, 1e-7);

  nlohmann::json d = run_json("--pred '" + f.pred + "' --gt '" + f.gt + "' --protocol doc");
  EXPECT_EQ(d["protocol"], "doc");
  EXPECT_NEAR(d["doc_f1"].get<double>(), 0.375, 1e-7);

  testutil::CliResult text = testutil::run_cli("score --pred '" + f.pred + "' --gt '" + f.gt + "' --protocol doc -q");
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("0.3750"), std::string::npos) << text.out;
}

TEST(EvalScore, ScoresFromJsonlAndJson) {
  Fixture f;
  std::string jsonl = testutil::temp_dir("score-s") + "/s.jsonl";
  write_text(jsonl,
             "{\"file\": \"x/a.jpg\", \"image_score\": 0.9}\n\n"
             "{\"file\": \"b.png\", \"image_score\": 0.8}\n"
             "{\"stem\": \"c\", \"score\": 0.7}\n"
             "{\"file\": \"b.png\", \"image_score\": 0.1}\n");  // the later record for b wins
  nlohmann::json j = run_json("--pred '" + f.pred + "' --gt '" + f.gt + "' --scores '" + jsonl + "'");
  EXPECT_EQ(j["image_tp"], 2);
  EXPECT_EQ(j["image_tn"], 1);
  EXPECT_NEAR(j["image_f1"].get<double>(), 1.0, 1e-7);
  EXPECT_NEAR(j["image_auc"].get<double>(), 1.0, 1e-12);
  EXPECT_EQ(j["pixel_tp"], 3);  // pixel metrics do not depend on the scores

  std::string json = testutil::temp_dir("score-s") + "/s.json";
  write_text(json, "{\"a\": 0.2, \"b.png\": 0.6, \"c\": 0.9}");
  nlohmann::json k = run_json("--pred '" + f.pred + "' --gt '" + f.gt + "' --scores '" + json + "'");
  EXPECT_EQ(k["image_tp"], 1);  // c
  EXPECT_EQ(k["image_fn"], 1);  // a
  EXPECT_EQ(k["image_fp"], 1);  // b
  EXPECT_NEAR(k["image_auc"].get<double>(), 0.5, 1e-12);

  std::map<std::string, double> s = read_image_scores(jsonl);
  EXPECT_EQ(s.size(), 3u);
  EXPECT_DOUBLE_EQ(s["b"], 0.1);
  // A stem missing from the scores file is an error naming it.
  write_text(json, "{\"a\": 0.2, \"b\": 0.6}");
  testutil::CliResult r = testutil::run_cli("score --pred '" + f.pred + "' --gt '" + f.gt + "' --scores '" + json + "' -q");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'c'"), std::string::npos) << r.err;
}

TEST(EvalScore, ErrorsNameTheFiles) {
  Fixture f;
  // Missing prediction for a GT stem.
  write_png(f.gt + "/d.png", u8({{0, 0}, {0, 0}}));
  testutil::CliResult r = testutil::run_cli("score --pred '" + f.pred + "' --gt '" + f.gt + "' -q");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error: d: no prediction"), std::string::npos) << r.err;
  std::filesystem::remove(f.gt + "/d.png");
  // Size mismatch names both files.
  write_png(f.pred + "/c.prob.png", u8({{60, 60, 60}, {60, 60, 60}}));
  r = testutil::run_cli("score --pred '" + f.pred + "' --gt '" + f.gt + "' -q");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(f.pred + "/c.prob.png"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(f.gt + "/c.png"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("size mismatch"), std::string::npos) << r.err;
  // Unknown protocol.
  r = testutil::run_cli("score --pred '" + f.pred + "' --gt '" + f.gt + "' --protocol docs -q");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown protocol"), std::string::npos) << r.err;
}

TEST(EvalScore, DatasetDirWithMasksSubfolder) {
  Fixture f;
  std::string ds = testutil::temp_dir("score-ds");
  std::filesystem::rename(f.gt, ds + "/masks");
  nlohmann::json j = run_json("--pred '" + f.pred + "' --gt '" + ds + "'");
  EXPECT_EQ(j["num_images"], 3);
  EXPECT_EQ(j["pixel_tp"], 3);
}
