// diffnet eval --weights W --data D --protocol syn2real|doc: runs the model over a dataset and scores it.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "diffnet/calibration.h"
#include "diffnet/eval.h"
#include "diffnet/image_io.h"
#include "diffnet/predict.h"

namespace diffnet::cli {
namespace {

struct EvalCli {
  std::string weights;
  bool random_weights = false;
  std::string protocol = "syn2real";
  EvalOptions eval;
  PredictOptions predict;
  std::string merge, score;      // empty: the protocol's default
  std::string reliability_png;
  bool json = false;
};

void run(const EvalCli& o) {
  check_protocol(o.protocol);
  PredictOptions popt = o.predict;
  // syn2real keeps the protocol's rule (max-merge, image score = max over windows); doc uses the
  // whole-page defaults of predict (blend, calibrated page score).
  popt.merge = !o.merge.empty() ? o.merge : (o.protocol == "syn2real" ? "max" : "blend");
  popt.score = !o.score.empty() ? o.score : (o.protocol == "syn2real" ? "window-max" : "page");
  Predictor predictor(choose_weights(o.weights, o.random_weights), popt);
  EvalMetrics m = evaluate_dataset(predictor, o.eval);
  if (!o.reliability_png.empty()) {
    Reliability r = reliability(m.scores, m.labels);
    char title[96];
    std::snprintf(title, sizeof title, "N %lld  BRIER %.3f  ECE %.3f", (long long)m.num_images, r.brier, r.ece);
    std::vector<uint8_t> img = draw_reliability_diagram(r, title);
    const int64_t S = int64_t(std::lround(std::sqrt(double(img.size() / 3))));
    write_png(o.reliability_png, at::from_blob(img.data(), {S, S, 3}, at::kByte).clone());
  }
  nlohmann::json j = metrics_to_json(m, o.protocol);
  j["merge"] = popt.merge;
  j["score"] = popt.score;
  j["stride"] = predictor.stride();
  j["refine"] = predictor.refine();
  j["refine_core"] = predictor.refine_core();
  j["downscale"] = downscale_setting(popt.downscale);
  j["window"] = predictor.window();
  j["calibrated"] = popt.score == "page" && predictor.model().calibration.has_value();
  if (o.json) std::printf("%s\n", j.dump().c_str());
  else std::printf("%s", format_metrics(m, o.protocol).c_str());
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalCli>();
  CLI::App* sub = app.add_subcommand("eval", "Run a model over a dataset and report Syn2Real / Doc-protocol metrics");
  sub->add_option("-w,--weights", o->weights,
                  "Weights (.safetensors); default $DIFFNET_WEIGHTS, else the installed or the source tree's weights/diffnet-atto.safetensors");
  sub->add_flag("--random-weights", o->random_weights,
                "Use an untrained model instead of weights (timing and tests only: results are meaningless)");
  sub->add_option("--data", o->eval.data, "Dataset: DIR with images/ (+ masks/), DocTamper LMDB dir, or list file")
      ->required();
  sub->add_option("--protocol", o->protocol, "syn2real (global pixel counts) or doc (mean per-image F1)")
      ->capture_default_str();
  sub->add_option("--save-pred", o->eval.save_pred_dir, "Also write <id>.prob.png and predictions.jsonl here");
  sub->add_option("--window", o->predict.window, "Window size R (multiple of 32); default: the weights' train_size, else 512");
  sub->add_option("--stride", o->predict.stride, "Window stride (multiple of 8, <= R); default R/2 (blend), R (max)");
  sub->add_option("--merge", o->merge, "blend | max; default max for syn2real, blend for doc")
      ->check(CLI::IsMember({"blend", "max"}));
  sub->add_option("--score", o->score, "page | window-max; default window-max for syn2real, page for doc")
      ->check(CLI::IsMember({"page", "window-max"}));
  sub->add_option("--reliability-png", o->reliability_png, "Write a reliability diagram of the image scores here");
  sub->add_option("--batch", o->predict.batch, kBatchHelp)->capture_default_str();
  sub->add_option("--refine", o->predict.refine, kRefineHelp);
  sub->add_option("--refine-core", o->predict.refine_core, kRefineCoreHelp)->capture_default_str();
  add_downscale_option(sub, o->predict.downscale);
  sub->add_flag("!--all-windows", o->predict.skip_blank,
                "Run the windows without content too (by default they are skipped when the page score is calibrated)");
  sub->add_option("--page-threshold", o->predict.page_threshold,
                  "Pages counted flagged above this page score; default the weights' decision threshold");
  sub->add_option("--device", o->predict.device, "cpu | cuda | cuda:N")->capture_default_str();
  sub->add_option("--precision", o->predict.precision, kPrecisionHelp)->capture_default_str();
  sub->add_option("--dct-source", o->predict.dct_source, "auto | file | pixels")
      ->check(CLI::IsMember({"auto", "file", "pixels"}))
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print one JSON object instead of text");
  sub->add_flag("-q,--quiet", o->eval.quiet, "No progress line");
  sub->callback([o] { run(*o); });
}

}  // namespace diffnet::cli
