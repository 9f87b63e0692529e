// diffnet score --pred DIR --gt DIR --protocol syn2real|doc: scores saved probability maps (any method's)
// against ground-truth masks with the project's metrics code.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "diffnet/eval.h"

namespace diffnet::cli {
namespace {

struct ScoreCli {
  ScoreOptions opt;
  std::string protocol = "syn2real";
  bool json = false;
};

void run(const ScoreCli& o) {
  check_protocol(o.protocol);
  EvalMetrics m = score_directories(o.opt);
  if (o.json) std::printf("%s\n", metrics_to_json(m, o.protocol).dump().c_str());
  else std::printf("%s", format_metrics(m, o.protocol).c_str());
}

}  // namespace

void add_score_command(CLI::App& app) {
  auto o = std::make_shared<ScoreCli>();
  CLI::App* sub = app.add_subcommand(
      "score", "Score 8-bit probability maps (<stem>.prob.png or <stem>.png, value/255) against GT masks");
  sub->add_option("--pred", o->opt.pred_dir, "Directory of predicted maps")->required();
  sub->add_option("--gt", o->opt.gt_dir, "Directory of GT masks <stem>.png (or a dataset dir with masks/)")->required();
  sub->add_option("--protocol", o->protocol, "syn2real (global pixel counts) or doc (mean per-image F1)")
      ->capture_default_str();
  sub->add_option("--scores", o->opt.scores_file,
                  "Image scores (.json {stem: score} / records, or .jsonl such as predictions.jsonl); "
                  "default: max of each map");
  sub->add_flag("--json", o->json, "Print one JSON object instead of text");
  sub->add_flag("-q,--quiet", o->opt.quiet, "No progress line");
  sub->callback([o] { run(*o); });
}

}  // namespace diffnet::cli
