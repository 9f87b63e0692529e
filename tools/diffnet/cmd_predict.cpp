// diffnet predict INPUT...: tampering probability map, overlay, regions and image score for whole images
// of any size (sliding windows on the JPEG grid), one JSON record per input.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "commands.h"
#include "diffnet/common.h"
#include "diffnet/device.h"
#include "diffnet/document.h"
#include "diffnet/image_io.h"
#include "diffnet/predict.h"
#include "diffnet/prediction_writer.h"
#include "diffnet/report.h"
#include "diffnet/synth.h"

namespace diffnet::cli {
namespace {

struct PredictCli {
  std::vector<std::string> inputs;
  std::string weights;
  bool random_weights = false;
  std::string out_dir;
  std::string report;  // --report FILE.html
  std::string csv;     // --csv FILE.csv
  PredictOptions opt;
  DocumentOptions doc;
  bool json = false;
  bool table = false;
  bool quiet = false;
  bool bench = false;
  int bench_runs = 3;
  std::string bench_preset;  // --bench with random weights of this preset
  double overlay_floor = -1;  // < 0: the threshold
};

// Inputs expanded: directories become their image and document files (sorted); files keep the given order.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& in : inputs) {
    if (std::filesystem::is_directory(in, ec)) {
      std::vector<std::string> listed = list_image_files(in, /*documents=*/true);
      if (listed.empty()) std::fprintf(stderr, "warning: %s: no .jpg/.jpeg/.png/.pdf/.tif/.tiff files\n", in.c_str());
      files.insert(files.end(), listed.begin(), listed.end());
    } else {
      files.push_back(in);
    }
  }
  return files;
}

// The table's first column is as wide as the longest input name (at least 40), so names are never cut.
void print_table_header(int width) {
  std::printf("%-*s %8s %-6s %-9s %7s %9s\n", width, "file", "score", "kind", "decision", "regions", "ms");
}

void print_table_row(const Prediction& p, int width) {
  std::printf("%-*s %8.4f %-6s %-9s %7zu %9.0f\n", width, p.file.c_str(), p.image_score,
              p.score_kind == "calibrated" ? "cal" : "uncal", p.decision.c_str(), p.regions.size(), p.timings.total_ms);
  std::fflush(stdout);
}

// A4 pages for --bench, as JPEG bytes.
// Rows of solid dark bars on white, quality 90: no real page looks like it, and the model finds something
// in nearly every window, so coarse-to-fine refines almost all of them (the costly case).
std::vector<uint8_t> bars_page(int64_t width, int64_t height) {
  at::Tensor page = at::full({height, width, 3}, 250, at::kByte);
  const int64_t line = std::max<int64_t>(height / 60, 8), margin = width / 12;
  for (int64_t y = margin, row = 0; y + line < height - margin; y += 2 * line, ++row)
    for (int64_t x = margin, w = 0; x < width - margin; ++w) {
      int64_t word = line * (2 + (row * 7 + w * 3) % 6);
      int64_t x1 = std::min(x + word, width - margin);
      page.slice(0, y, y + line).slice(1, x, x1).fill_(30);
      x = x1 + line;
    }
  return encode_jpeg(page, 90);
}

// An untouched document rendered by `diffnet synth` (fixed seed, print-scan look, one JPEG save at quality
// 90) at `dpi`: what a scanned payslip, invoice or statement costs. Made in a temporary folder, removed.
std::vector<uint8_t> rendered_page(const std::string& layout, int dpi) {
  const TempDir dir("diffnet-bench");
  SynthOptions s;
  s.out = dir.path() + "/page";
  s.count = 1;
  s.seed = 1;
  s.layouts = {layout};
  s.dpi_min = s.dpi_max = dpi;
  s.output_format = "jpeg";
  s.q1_prob = 0;
  s.q2_min = s.q2_max = 90;
  s.pristine_prob = 1;
  s.print_scan_prob = 1;
  s.quiet = true;
  run_synth(s);
  return read_file(s.out + "/images/00000000.jpg");
}

void run_bench(Predictor& predictor, int runs) {
  std::printf("benchmark: window %lld, batch %lld, %s, %s, weights %s; %d timed runs after 1 warm-up\n",
              (long long)predictor.window(), (long long)predictor.batch(),
              device_description(predictor.device()).c_str(), predictor.precision().c_str(),
              predictor.model().source.c_str(), runs);
  std::printf("%-32s %9s %7s %7s %9s %9s %9s %9s\n", "page (median ms)", "windows", "decode", "dct", "model",
              "total", "min total", "ms/window");
  struct Page {
    std::string name;
    std::function<std::vector<uint8_t>()> make;
  };
  std::vector<Page> pages;
  for (int dpi : {150, 300}) {
    const int64_t w = dpi == 150 ? 1240 : 2480, h = dpi == 150 ? 1754 : 3508;
    pages.push_back({"A4 " + std::to_string(dpi) + " dpi bars", [w, h] { return bars_page(w, h); }});
    for (const char* layout : {"invoice", "payslip", "statement"})
      pages.push_back({"A4 " + std::to_string(dpi) + " dpi " + layout, [layout, dpi] { return rendered_page(layout, dpi); }});
  }
  for (const Page& pg : pages) {
    const std::vector<uint8_t> jpeg = pg.make();
    predictor.predict_bytes(jpeg, pg.name);  // warm-up
    std::vector<PredictTimings> t;
    int64_t windows = 0, planned = 0;  // windows run, of planned
    for (int i = 0; i < runs; ++i) {
      Prediction p = predictor.predict_bytes(jpeg, pg.name);
      t.push_back(p.timings);
      windows = p.num_windows - p.skipped_windows - p.cold_windows;
      planned = p.num_windows;
    }
    auto sorted = [&](double PredictTimings::*field) {
      std::vector<double> v;
      for (const auto& x : t) v.push_back(x.*field);
      std::sort(v.begin(), v.end());
      return v;
    };
    auto median = [&](double PredictTimings::*field) { return sorted(field)[t.size() / 2]; };
    double min_total = sorted(&PredictTimings::total_ms).front();
    const std::string run_of = std::to_string(windows) + "/" + std::to_string(planned);
    std::printf("%-32s %9s %7.0f %7.0f %9.0f %9.0f %9.0f %9.0f\n", pg.name.c_str(), run_of.c_str(),
                median(&PredictTimings::decode_ms), median(&PredictTimings::dct_ms),
                median(&PredictTimings::model_ms), median(&PredictTimings::total_ms), min_total,
                sorted(&PredictTimings::model_ms).front() / double(windows));
    std::fflush(stdout);
  }
}

void run(const PredictCli& o) {
  if (!o.bench_preset.empty() && !((o.bench || o.random_weights) && o.weights.empty()))
    throw Error("--preset", "is for random weights (--random-weights, or --bench without --weights)");
  Predictor predictor(o.bench && !o.bench_preset.empty()
                          ? random_model(o.bench_preset)
                          : choose_weights(o.weights, o.random_weights, o.bench_preset.empty() ? "atto" : o.bench_preset),
                      o.opt);
  OverlayOptions overlay;
  overlay.floor = o.overlay_floor >= 0 ? o.overlay_floor : o.opt.threshold;
  if (!(overlay.floor < 1)) throw Error("--overlay-floor", "must be < 1");
  if (!o.bench && !predictor.model().calibration && o.opt.score == "page")
    std::fprintf(stderr, "note: %s has no calibration metadata: image_score is the uncalibrated max over windows "
                         "(see `diffnet calibrate`)\n", predictor.model().source.c_str());
  if (o.bench) {
    if (o.bench_runs < 1) throw Error("--bench-runs", "must be >= 1");
    run_bench(predictor, o.bench_runs);
    return;
  }
  if (o.inputs.empty()) throw Error("predict", "no input images (give files or directories)");
  std::vector<std::string> files = expand_inputs(o.inputs);
  if (files.empty()) throw Error("predict", "no input images found");
  std::unique_ptr<PredictionWriter> writer;
  if (!o.out_dir.empty()) {
    PredictionWriterOptions wo;
    wo.overlay = overlay;
    writer = std::make_unique<PredictionWriter>(o.out_dir, wo);
  }
  // Opened before any inference, so that an unwritable path fails now rather than after the batch.
  std::unique_ptr<HtmlReport> report;
  std::unique_ptr<CsvReport> csv;
  if (!o.report.empty() && o.report == o.csv) throw Error("--csv", "must name another file than --report");
  if (!o.report.empty()) {
    ReportOptions ro;
    ro.model = predictor.model().source;
    ro.threshold = predictor.page_threshold();
    ro.overlay = overlay;
    report = std::make_unique<HtmlReport>(o.report, ro);
  }
  if (!o.csv.empty()) csv = std::make_unique<CsvReport>(o.csv);
  const bool table = o.table || !o.json;
  int width = 40;
  for (const auto& f : files) width = std::max(width, int(f.size()) + 4);  // room for "#123" of a page
  if (table) print_table_header(width);
  int failures = 0, inputs = 0;
  // One record per page: a JPEG/PNG file is one page; PDF and TIFF files give "<file>#<page>" records.
  auto one = [&](const std::string& file, int64_t page, const std::function<Prediction()>& predict) {
    const std::string name = page > 0 ? page_name(file, page) : file;
    ++inputs;
    std::optional<Prediction> p;
    at::Tensor drawn;
    std::string error;
    try {
      p = predict();
      // The overlay is drawn once for the output folder and the report (the same options).
      if (writer || report) drawn = render_overlay(p->rgb, p->prob, p->regions, overlay);
      nlohmann::json record = prediction_to_json(*p);
      if (writer) record = writer->write(*p, std::move(record), writer->base_name(file, page), {}, drawn);
      if (o.json) {
        std::printf("%s\n", record.dump().c_str());
        std::fflush(stdout);
      }
      if (table) print_table_row(*p, width);
      for (const std::string& w : p->warnings) std::fprintf(stderr, "warning: %s: %s\n", name.c_str(), w.c_str());
    } catch (const std::exception& e) {
      std::fflush(stdout);
      std::string what = e.what();
      // diffnet::Error messages already start with the file name; others get it prepended.
      if (what.rfind(name, 0) != 0) what = name + ": " + what;
      std::fprintf(stderr, "error: %s\n", what.c_str());
      ++failures;
      p.reset();
      error = what;
    }
    // Outside the try: a report that cannot be written stops the run (it is not this input's failure).
    if (report) p ? report->add(*p, drawn) : report->add_failure(name, error);
    if (csv) p ? csv->add(*p) : csv->add_failure(name, error);
  };
  Progress progress("predict", int64_t(files.size()), o.quiet || files.size() < 2 || table);
  for (const auto& file : files) {
    refresh_threads();  // a job that started beside us since the last input: use the cores left
    std::unique_ptr<DocumentReader> doc;
    std::string open_error;
    try {
      doc = std::make_unique<DocumentReader>(file, o.doc);
    } catch (const std::exception& e) {
      open_error = e.what();
    }
    if (!doc) {
      one(file, 0, [&]() -> Prediction { throw std::runtime_error(open_error); });
    } else if (doc->format() == "image") {
      one(file, 0, [&] { return predictor.predict_page(doc->page(0)); });
    } else {
      for (int64_t i = 0; i < doc->pages(); ++i)
        one(file, i + 1, [&] { return predictor.predict_page(doc->page(i)); });
    }
    progress.step();
  }
  progress.finish();
  if (report) report->finish();
  if (csv) csv->finish();
  if (failures > 0) {
    std::fprintf(stderr, "predict: %d of %d input(s) failed\n", failures, inputs);
    exit_code() = 2;
  }
}

}  // namespace

void add_predict_command(CLI::App& app) {
  auto o = std::make_shared<PredictCli>();
  CLI::App* sub = app.add_subcommand(
      "predict", "Tampering map, overlay, regions and page score for images of any size and the pages of PDF/TIFF files");
  sub->add_option("inputs", o->inputs,
                  "JPEG/PNG/PDF/TIFF files and/or directories (their .jpg/.jpeg/.png/.pdf/.tif/.tiff, sorted)");
  sub->add_option("-w,--weights", o->weights,
                  "Weights (.safetensors); default $DIFFNET_WEIGHTS, else the installed or the source tree's weights/diffnet-atto.safetensors");
  sub->add_flag("--random-weights", o->random_weights,
                "Use an untrained model instead of weights (timing and tests only: results are meaningless)");
  sub->add_option("-o,--out", o->out_dir,
                  "Write <stem>.prob.png, <stem>.overlay.png and the records (predictions.jsonl) here; a rerun replaces its records");
  sub->add_option("--report", o->report,
                  "Also write one self-contained HTML report here: summary table, overlays, region crops");
  sub->add_option("--csv", o->csv, "Also write one CSV row per input here: file,page,decision,image_score,regions,"
                                   "width,height,error,warnings");
  sub->add_option("--window", o->opt.window, "Window size R (multiple of 32); default: the weights' train_size, else 512");
  sub->add_option("--stride", o->opt.stride, "Window stride (multiple of 8, <= R); default R/2 (blend), R (max)");
  sub->add_option("--merge", o->opt.merge, "How window maps are merged: blend (raised-cosine weights) or max")
      ->check(CLI::IsMember({"blend", "max"}))
      ->capture_default_str();
  sub->add_option("--score", o->opt.score,
                  "Page score: page (calibrated when the weights carry calibration) or window-max")
      ->check(CLI::IsMember({"page", "window-max"}))
      ->capture_default_str();
  sub->add_option("--batch", o->opt.batch, kBatchHelp)->capture_default_str();
  sub->add_option("--refine", o->opt.refine, kRefineHelp);
  sub->add_option("--refine-core", o->opt.refine_core, kRefineCoreHelp)->capture_default_str();
  add_downscale_option(sub, o->opt.downscale);
  sub->add_flag("!--all-windows", o->opt.skip_blank,
                "Run the windows without content too (by default they are skipped when the page score is calibrated)");
  sub->add_option("--dct-source", o->opt.dct_source,
                  "auto: JPEG coefficients from the file, pixels otherwise; or force file|pixels")
      ->check(CLI::IsMember({"auto", "file", "pixels"}))
      ->capture_default_str();
  sub->add_option_function<std::string>(
         "--orientation", [o](const std::string& v) { o->opt.apply_exif_orientation = parse_orientation(v); },
         "exif: a JPEG/PNG whose EXIF orientation tag turns or mirrors it runs as viewers show it (map, regions and "
         "overlay come back in the stored orientation); stored: as stored, with a warning")
      ->default_str("exif");
  sub->add_option("--pdf-dpi", o->doc.pdf_dpi,
                  "Resolution of rendered PDF pages (a page that is one embedded JPEG is analysed as that JPEG)")
      ->capture_default_str();
  sub->add_option("--max-pages", o->doc.max_pages, "A PDF/TIFF file with more pages is refused")->capture_default_str();
  sub->add_option("--threshold", o->opt.threshold, "Pixel threshold: regions are p > this (and the overlay's floor)")
      ->capture_default_str();
  sub->add_option("--page-threshold", o->opt.page_threshold,
                  "Decision: tampered when the page score is above this; default the weights' (docs/eval.md)");
  sub->add_option("--min-region", o->opt.min_region_area, "Smallest region reported, in pixels")->capture_default_str();
  sub->add_option("--region-gap", o->opt.region_gap, "Hot areas at most this many pixels apart form one region (0: touching only)")
      ->capture_default_str();
  sub->add_option("--overlay-floor", o->overlay_floor, "Overlay draws nothing where p is below this; default the threshold");
  sub->add_flag("--json", o->json, "Print one JSON record per input on stdout");
  sub->add_flag("--table", o->table, "Print a table: file, score, decision, regions (default without --json)");
  sub->add_flag("-q,--quiet", o->quiet, "No progress line");
  sub->add_option("--device", o->opt.device, "cpu | cuda | cuda:N")->capture_default_str();
  sub->add_option("--precision", o->opt.precision, kPrecisionHelp)->capture_default_str();
  sub->add_flag("--bench", o->bench, "Time A4 pages at 150 and 300 dpi instead of predicting: bars on white (every window busy) and rendered invoice, payslip, statement");
  sub->add_option("--preset", o->bench_preset, "With --bench or --random-weights: random weights of this preset (e.g. base)");
  sub->add_option("--bench-runs", o->bench_runs, "Timed runs per page for --bench")->capture_default_str();
  sub->callback([o] { run(*o); });
}

}  // namespace diffnet::cli
