// diffnet eval --weights W --data D --protocol syn2real|doc: runs the model over a dataset and scores it.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "diffnet/eval.h"
#include "diffnet/predict.h"

namespace diffnet::cli {
namespace {

struct EvalCli {
  std::string weights;
  std::string protocol = "syn2real";
  EvalOptions eval;
  PredictOptions predict;
  bool json = false;
};

void run(const EvalCli& o) {
  check_protocol(o.protocol);
  Predictor predictor(load_weights_or_random(o.weights), o.predict);
  EvalMetrics m = evaluate_dataset(predictor, o.eval);
  if (o.json) std::printf("%s\n", metrics_to_json(m, o.protocol).dump().c_str());
  else std::printf("%s", format_metrics(m, o.protocol).c_str());
}

Registrar reg("eval", [](CLI::App& app) {
  auto o = std::make_shared<EvalCli>();
  CLI::App* sub = app.add_subcommand("eval", "Run a model over a dataset and report Syn2Real / Doc-protocol metrics");
  sub->add_option("-w,--weights", o->weights,
                  "Weights (.safetensors); default $DIFFNET_WEIGHTS or weights/diffnet-atto.safetensors");
  sub->add_option("--data", o->eval.data, "Dataset: DIR with images/ (+ masks/), DocTamper LMDB dir, or list file")
      ->required();
  sub->add_option("--protocol", o->protocol, "syn2real (global pixel counts) or doc (mean per-image F1)")
      ->capture_default_str();
  sub->add_option("--save-pred", o->eval.save_pred_dir, "Also write <id>.prob.png and predictions.jsonl here");
  sub->add_option("--window", o->predict.window, "Window size R (multiple of 32); default: the weights' train_size, else 512");
  sub->add_option("--stride", o->predict.stride, "Window stride (multiple of 8, <= R); default R");
  sub->add_option("--batch", o->predict.batch, "Windows per forward pass")->capture_default_str();
  sub->add_option("--device", o->predict.device, "cpu | cuda | cuda:N")->capture_default_str();
  sub->add_option("--dct-source", o->predict.dct_source, "auto | file | pixels")
      ->check(CLI::IsMember({"auto", "file", "pixels"}))
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print one JSON object instead of text");
  sub->add_flag("-q,--quiet", o->eval.quiet, "No progress line");
  sub->callback([o] { run(*o); });
});

}  // namespace
}  // namespace diffnet::cli
