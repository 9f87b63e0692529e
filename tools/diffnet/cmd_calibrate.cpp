// diffnet calibrate --data VAL --out W2: fits the page-score calibration p = sigmoid(a f(raw) + b) on a
// validation set (never a test set), sets the page decision threshold from the set's untouched pages
// (--false-alarm), and writes a copy of the weights with both in the metadata.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "diffnet/calibration.h"
#include "diffnet/common.h"
#include "diffnet/dataset.h"
#include "diffnet/metrics.h"
#include "diffnet/predict.h"
#include "diffnet/safetensors.h"

namespace diffnet::cli {
namespace {

struct CalibrateCli {
  std::string data, weights, out, stats_out, from_stats;
  std::string statistic = "auto", transform = "logit";
  PredictOptions predict;
  double l2 = 1e-4;
  double false_alarm = 0.05;
  bool json = false, quiet = false;
};

struct Item {
  std::string id;
  int label = 0;
  PageStats stats;
  int64_t window = 0, stride = 0;  // as recorded (0: unknown)
  double refine = 0;                // coarse-to-fine level (PredictOptions::refine) as recorded
  double refine_core = 0;           // and its core weight (PredictOptions::refine_core; 0 in older records)
  std::string downscale = "1";      // downscale_setting() of the run: "auto" or the factor ("1" in older records)
};

PageStats stats_from_json(const nlohmann::json& j) {
  PageStats s;
  s.content_fraction = j.value("content_fraction", 0.0);
  s.q99 = j.at("q99").get<double>();
  s.q999 = j.at("q999").get<double>();
  s.cls_max = j.at("cls_max").get<double>();
  s.cls_mean = j.at("cls_mean").get<double>();
  s.content_windows = j.value("content_windows", int64_t(0));
  return s;
}

std::vector<Item> read_stats(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path, "cannot open");
  std::vector<Item> items;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      nlohmann::json j = nlohmann::json::parse(line);
      // Our --stats-out records, or `diffnet eval --save-pred` records (which name the image by "file").
      items.push_back({j.value("id", j.value("file", std::to_string(line_no))), j.at("label").get<int>() ? 1 : 0,
                       stats_from_json(j.at("page_stats")), j.value("window", int64_t(0)), j.value("stride", int64_t(0)),
                       j.value("refine", 0.0), j.value("refine_core", 0.0),
                       downscale_setting(j.value("downscale_rule", std::string("fixed")) == "auto"
                                             ? kDownscaleAuto
                                             : j.value("downscale", int64_t(1)))});
      if (j.value("merge", std::string("blend")) != "blend")
        throw Error(path + ":" + std::to_string(line_no), "statistics of a max-merged map: calibrate blended maps");
    } catch (const std::exception& e) {
      throw Error(path + ":" + std::to_string(line_no), e.what());
    }
  }
  if (items.empty()) throw Error(path, "no records");
  return items;
}

std::vector<Item> run_model(const CalibrateCli& o, Predictor& predictor) {
  std::vector<DatasetItem> listed = list_dataset(o.data);
  if (listed.empty()) throw Error(o.data, "dataset is empty");
  std::unique_ptr<std::ofstream> out;
  if (!o.stats_out.empty()) {
    out = std::make_unique<std::ofstream>(o.stats_out, std::ios::trunc);
    if (!*out) throw Error(o.stats_out, "cannot open for writing");
  }
  std::vector<Item> items;
  Progress progress("calibrate", int64_t(listed.size()), o.quiet);
  for (const DatasetItem& d : listed) {
    LoadedItem li = load_item(d);
    Prediction p = predictor.predict_rgb(li.rgb, li.image_bytes, li.id);
    Item it{li.id, li.tampered() ? 1 : 0, p.page_stats, p.window, p.stride, p.refine, p.refine_core,
            downscale_setting(p.downscale_auto ? kDownscaleAuto : p.downscale)};
    if (out) {
      *out << nlohmann::json{{"id", it.id}, {"label", it.label}, {"page_stats", page_stats_to_json(it.stats)},
                             {"window", p.window}, {"stride", p.stride}, {"refine", p.refine}, {"refine_core", p.refine_core}, {"downscale", p.downscale},
                             {"downscale_rule", p.downscale_auto ? "auto" : "fixed"}, {"merge", p.merge}}
                  .dump()
           << "\n";
      out->flush();
    }
    items.push_back(std::move(it));
    progress.step();
  }
  progress.finish();
  return items;
}

void run(const CalibrateCli& o) {
  if (o.data.empty() == o.from_stats.empty()) throw Error("calibrate", "give exactly one of --data and --from-stats");
  if (o.transform != "logit" && o.transform != "identity") throw Error("--transform", "expected logit or identity");
  LoadedModel lm = load_weights(o.weights);
  const std::string source = lm.source;
  PredictOptions popt = o.predict;
  popt.merge = "blend";
  popt.score = "page";
  Predictor predictor(std::move(lm), popt);
  std::vector<Item> items = o.from_stats.empty() ? run_model(o, predictor) : read_stats(o.from_stats);
  // The statistics depend on the window and stride they were computed with: record them (from the
  // stats records when they name them, else this run's settings).
  int64_t window = predictor.window(), stride = predictor.stride();
  const double refine = items.front().refine, refine_core = items.front().refine_core;
  const std::string downscale = items.front().downscale;
  if (items.front().window > 0) window = items.front().window, stride = items.front().stride;
  for (const Item& it : items)
    if ((it.window > 0 && (it.window != window || it.stride != stride)) || it.refine != refine ||
        it.refine_core != refine_core || it.downscale != downscale)
      throw Error(o.from_stats, "records computed with different windows/strides/refine levels/downscales");

  std::vector<int> y;
  for (const Item& it : items) y.push_back(it.label);
  const int64_t npos = std::count(y.begin(), y.end(), 1), nneg = int64_t(y.size()) - npos;
  if (npos == 0 || nneg == 0) throw Error("calibrate", "the data needs both tampered and untouched pages");
  const std::vector<double> w = balanced_weights(y);

  // Fit every candidate statistic; report each one's AUC and balanced log loss on this (fit) set. `auto`
  // leaves out cls_max: a maximum over windows rises with the page's size, which the page score must not.
  std::vector<std::string> names =
      o.statistic == "auto" ? size_invariant_page_stat_names() : std::vector<std::string>{o.statistic};
  nlohmann::json table = nlohmann::json::array();
  std::string best;
  double best_auc = -1, best_loss = 1e300;
  PageCalibration chosen;
  for (const std::string& name : names) {
    PageCalibration c;
    c.statistic = name;
    c.transform = o.transform;
    std::vector<double> x, raw;
    for (const Item& it : items) raw.push_back(page_stat(it.stats, name)), x.push_back(c.feature(raw.back()));
    LogisticFit f = fit_logistic(x, y, w, o.l2);
    c.a = f.a, c.b = f.b;
    const double auc = roc_auc(raw, y).value_or(0.5);
    table.push_back({{"statistic", name}, {"auc", auc}, {"log_loss", f.log_loss}, {"a", f.a}, {"b", f.b},
                     {"converged", f.converged}});
    if (!o.quiet)
      std::fprintf(stderr, "calibrate: %-9s AUC %.4f  balanced log loss %.4f  a %.4f  b %.4f%s\n", name.c_str(), auc,
                   f.log_loss, f.a, f.b, f.converged ? "" : "  (not converged)");
    if (auc > best_auc + 1e-12 || (std::abs(auc - best_auc) <= 1e-12 && f.log_loss < best_loss)) {
      best = name, best_auc = auc, best_loss = f.log_loss;
      chosen = c;
      chosen.fit = {{"data", o.from_stats.empty() ? o.data : o.from_stats},
                    {"n", int64_t(items.size())},
                    {"n_tampered", npos},
                    {"auc", auc},
                    {"balanced_log_loss", f.log_loss},
                    {"l2", o.l2},
                    {"window", window},
                    {"stride", stride},
                    {"refine", refine},
                    {"refine_core", refine_core},
                    {"downscale", downscale},
                    {"merge", "blend"}};
    }
  }
  // The decision threshold: at most floor(false_alarm * n) of this set's untouched pages score above it,
  // and never below 0.5 (a page less likely edited than not at the balanced prior is not flagged).
  std::vector<double> untouched_scores, tampered_scores;
  for (const Item& it : items)
    (it.label ? tampered_scores : untouched_scores).push_back(chosen.apply(page_stat(it.stats, chosen.statistic)));
  chosen.threshold = std::max(0.5, false_alarm_threshold(untouched_scores, o.false_alarm));
  auto above = [&](const std::vector<double>& v) {
    return int64_t(std::count_if(v.begin(), v.end(), [&](double s) { return s > chosen.threshold; }));
  };
  const int64_t untouched_above = above(untouched_scores), tampered_above = above(tampered_scores);
  chosen.fit["false_alarm"] = o.false_alarm;
  chosen.fit["untouched_above_threshold"] = untouched_above;
  chosen.fit["tampered_above_threshold"] = tampered_above;
  if (!o.quiet)
    std::fprintf(stderr, "calibrate: decision threshold %.4f: %lld of %lld untouched and %lld of %lld tampered pages above it\n",
                 chosen.threshold, (long long)untouched_above, (long long)nneg, (long long)tampered_above, (long long)npos);
  nlohmann::json result = {{"calibration", chosen.to_json()}, {"candidates", table}, {"weights", source}};
  if (!o.out.empty()) {
    SafeTensors st = load_safetensors(source);
    st.metadata[kCalibrationKey] = chosen.to_json().dump();
    const std::string dir = std::filesystem::path(o.out).parent_path().string();
    if (!dir.empty()) make_dirs(dir);
    save_safetensors(o.out, st.tensors, st.metadata);
    result["out"] = o.out;
  }
  if (o.json) {
    std::printf("%s\n", result.dump().c_str());
  } else {
    std::printf("calibration: statistic %s, transform %s, p = sigmoid(%.6f * f + %.6f), decision threshold %.4f; fit AUC %.4f on %zu pages%s\n",
                chosen.statistic.c_str(), chosen.transform.c_str(), chosen.a, chosen.b, chosen.threshold, best_auc, items.size(),
                o.out.empty() ? "" : (", written to " + o.out).c_str());
  }
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto o = std::make_shared<CalibrateCli>();
  CLI::App* sub = app.add_subcommand(
      "calibrate", "Fit the page-score calibration on a validation set and write weights that carry it");
  sub->add_option("--data", o->data, "Validation dataset (images/ + masks/, ...): never a test set");
  sub->add_option("--from-stats", o->from_stats,
                  "Fit from a --stats-out file, or an `eval --save-pred` predictions.jsonl, instead of running the model");
  sub->add_option("-w,--weights", o->weights,
                  "Weights (.safetensors); default $DIFFNET_WEIGHTS or weights/diffnet-atto.safetensors");
  sub->add_option("-o,--out", o->out, "Write the weights with the calibration in their metadata here");
  sub->add_option("--stats-out", o->stats_out, "Write each page's label and raw statistics here (JSONL)");
  std::vector<std::string> statistics = {"auto"};
  statistics.insert(statistics.end(), page_stat_names().begin(), page_stat_names().end());
  sub->add_option("--statistic", o->statistic, "auto (best fit-set AUC of the size-invariant q99, q999, cls_mean) | q99 | q999 | cls_max | cls_mean")
      ->check(CLI::IsMember(statistics))
      ->capture_default_str();
  sub->add_option("--transform", o->transform, "Feature: logit or identity of the statistic")
      ->check(CLI::IsMember({"logit", "identity"}))
      ->capture_default_str();
  sub->add_option("--l2", o->l2, "Ridge penalty on the slope a")->capture_default_str();
  sub->add_option("--false-alarm", o->false_alarm,
                  "Decision threshold: at most this share of the set's untouched pages above it (and >= 0.5)")
      ->check(CLI::Range(0.0, 0.999))
      ->capture_default_str();
  sub->add_option("--window", o->predict.window, "Window size R; default the weights' train_size");
  sub->add_option("--stride", o->predict.stride, "Window stride; default R/2");
  sub->add_option("--batch", o->predict.batch, kBatchHelp)->capture_default_str();
  sub->add_option("--refine", o->predict.refine, kRefineHelp);
  sub->add_option("--refine-core", o->predict.refine_core, kRefineCoreHelp)->capture_default_str();
  add_downscale_option(sub, o->predict.downscale);
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->add_flag("-q,--quiet", o->quiet, "No progress or per-statistic lines");
  sub->callback([o] { run(*o); });
}

}  // namespace diffnet::cli
