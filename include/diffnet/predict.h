// Whole-image inference (docs/design.md §4.3): R x R windows on the JPEG 8x8 grid, batched forward passes,
// window probabilities blended with raised-cosine weights (or max-merged: the Syn2Real protocol rule),
// and a page score: a calibrated probability computed from a size-invariant page statistic when the
// weights carry calibration metadata (docs/eval.md), else the max over windows of softmax(cls)[1].
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "diffnet/common.h"
#include "diffnet/document.h"
#include "diffnet/regions.h"

namespace diffnet {

struct ImageInfo;  // image_io.h

class DiffNetImpl;  // diffnet/model.h

// ---- Window planning -------------------------------------------------------------------------------

// Size of the padded canvas along one axis: max(window, size rounded up to a multiple of 8).
// Padding is added on the right/bottom only (white image, zero mask), so the 8x8 grid is kept.
int64_t padded_extent(int64_t size, int64_t window);

// Window origins along one axis of a canvas of `extent` (a multiple of 8, >= window): 0, stride,
// 2*stride, ... while the window stays inside, then one last window ending exactly at the border.
// Every origin is a multiple of 8 and the windows cover [0, extent). Throws Error for a window that is
// not a positive multiple of 32 or a stride that is not a multiple of 8 in [8, window].
std::vector<int64_t> window_origins(int64_t extent, int64_t window, int64_t stride);

struct WindowPos {
  int64_t y = 0, x = 0;  // top-left corner on the padded canvas
};
// All windows for an image of height x width (row-major order), on the canvas
// padded_extent(height) x padded_extent(width).
std::vector<WindowPos> plan_windows(int64_t height, int64_t width, int64_t window, int64_t stride);

// canvas (H, W) float: canvas[y:y+h, x:x+w] = max(canvas[...], window_prob (h, w)).
void max_merge(at::Tensor& canvas, const at::Tensor& window_prob, const WindowPos& pos);

// Default stride: R for merge "max" (the Syn2Real rule, no overlap); for "blend" R/2 rounded down to a
// multiple of 8 (chosen by measurement: docs/eval.md, "Stride").
int64_t default_stride(int64_t window, const std::string& merge);

// ---- Blending --------------------------------------------------------------------------------------

// Smallest blend weight: keeps every pixel's total weight > 0 whatever the stride.
constexpr float kBlendFloor = 1e-3f;

// Blend weight along one axis for a window of size `window` at `origin` on a canvas of `extent`:
// w(t) = max(kBlendFloor, sin^2(pi (t + 0.5) / window)) (a raised cosine, ~0 at the window's edges, 1 in
// its middle), except that the half of the window that touches the canvas border (origin == 0, or
// origin + window == extent) is flat at 1, so the page's own edges are covered at full weight.
std::vector<float> blend_profile(int64_t window, int64_t origin, int64_t extent);

// A (h, w) window's blend weight at pos on a (canvas_h, canvas_w) canvas: the outer product of its two
// axis profiles, float (h, w).
at::Tensor window_weight(int64_t h, int64_t w, const WindowPos& pos, int64_t canvas_h, int64_t canvas_w);

// Accumulates window maps into sum(w p) and sum(w) on a canvas; result() = sum(w p) / sum(w).
// The weight of a window is the outer product of its two axis profiles (blend_profile).
class BlendMerger {
 public:
  BlendMerger(int64_t canvas_h, int64_t canvas_w);
  void add(const at::Tensor& window_prob, const WindowPos& pos);  // window_prob (R, R) float
  at::Tensor current() const;  // the blend so far (a copy; 0 where no window reached); the merger goes on
  at::Tensor take();  // the blended (canvas_h, canvas_w) float map; once (the merger is spent after it)
 private:
  at::Tensor num_, den_;
};

// ---- Page content and page statistics ----------------------------------------------------------------

// An 8x8 block (on the canvas grid) holds content when its luma range max - min is >= this (white or
// uniform paper, scanner noise and JPEG ringing on blank paper stay below it; ink does not).
constexpr double kContentRange = 32;
// Content blocks are dilated by this many blocks (so an erased word, now blank, next to text still counts);
// blocks of exactly one colour (white margins, padding) are never content.
constexpr int64_t kContentDilate = 2;

// Content mask of an RGB uint8 (H, W, 3) image with H, W multiples of 8: bool (H/8, W/8).
at::Tensor content_blocks(const at::Tensor& rgb);

// Raw page statistics, each invariant to white margins (blank areas are ignored) and, for the
// pixel statistics, to tiling the page (they are quantiles of the map over content pixels).
struct PageStats {
  double content_fraction = 0;  // share of the image's pixels that are content
  double q99 = 0, q999 = 0;     // 0.99 / 0.999 quantiles of the blended map over content pixels
  double cls_max = 0;           // max of softmax(cls)[1] over windows holding content
  double cls_mean = 0;          // mean of softmax(cls)[1] over windows holding content
  int64_t content_windows = 0;  // windows holding content (when none, cls_* use all windows)
};
// Names accepted by page_stat(): q99, q999, cls_max, cls_mean.
const std::vector<std::string>& page_stat_names();
// The ones that do not grow with the page's size (all but cls_max, a maximum over windows): what
// `calibrate --statistic auto` chooses among.
const std::vector<std::string>& size_invariant_page_stat_names();
double page_stat(const PageStats& s, const std::string& name);  // Error for an unknown name
nlohmann::json page_stats_to_json(const PageStats& s);

// Quantile q in [0, 1] of prob (float, (H, W)) over the pixels whose mask cell is true: pixel (y, x) is
// in when mask[y / cell][x / cell] (cell 1: a pixel mask of the same shape; cell 8: content_blocks), to a
// resolution of 1/4096 (histogram; the upper edge of the bin that holds it). 0 when no pixel is in.
double masked_quantile(const at::Tensor& prob, const at::Tensor& mask, double q, int64_t cell = 1);
// The same for several quantiles from one pass, with the number of pixels that are in.
struct MaskedQuantiles {
  std::vector<double> values;  // one per requested q
  int64_t count = 0;           // pixels in
};
MaskedQuantiles masked_quantiles(const at::Tensor& prob, const at::Tensor& mask, const std::vector<double>& qs,
                                 int64_t cell = 1);

// ---- Calibration ------------------------------------------------------------------------------------

// Maps a raw page statistic to a probability: p = sigmoid(a * f(raw) + b), f = logit (raw clamped to
// [1e-4, 1 - 1e-4]) or identity; `threshold` is the page decision's operating point on that probability.
// Stored as JSON in the weights' metadata under "calibration":
// {"statistic": "q999", "transform": "logit", "a": .., "b": .., "prior": 0.5, "threshold": .., "fit": {...}}
// ("threshold" absent: 0.5).
struct PageCalibration {
  std::string statistic = "q999";
  std::string transform = "logit";  // logit | identity
  double a = 1, b = 0;
  double prior = 0.5;               // class prior the fit was balanced to (documentation)
  double threshold = 0.5;           // default page decision threshold on apply()'s probability, in [0, 1)
  nlohmann::json fit;               // provenance: data, counts, log loss, ... (free form)
  double feature(double raw) const;
  double apply(double raw) const;   // the calibrated probability
  nlohmann::json to_json() const;
  static PageCalibration from_json(const nlohmann::json& j, const std::string& subject);
};

// Metadata key of the calibration JSON in a weights file.
inline constexpr const char* kCalibrationKey = "calibration";

// ---- Inputs ---------------------------------------------------------------------------------------

// Image files (.jpg, .jpeg, .png; case-insensitive) directly inside dir, sorted by file name; with
// `documents` also .pdf, .tif, .tiff (document.h). Throws Error(dir, ...) when dir is not a readable directory.
std::vector<std::string> list_image_files(const std::string& dir, bool documents = false);

// ---- Predictor ------------------------------------------------------------------------------------

inline constexpr int64_t kAutoBatchPixels = 8 * 256 * 256;

// The warning of a born-digital PDF page (DocumentPage::born_digital), in its record's `warnings`.
inline constexpr const char* kBornDigitalWarning =
    "born-digital page (a PDF page of text and vector graphics, no image over half of it): the model is "
    "trained and validated on scans, and on never-printed pages its decision is unreliable (it flags about "
    "half of the untouched ones; README, \"What it still misses\")";

// PredictOptions::downscale: each page's factor chosen from its size (auto_downscale).
inline constexpr int64_t kDownscaleAuto = 0;

struct PredictOptions {
  int64_t window = 0;              // R; 0: the weights' "train_size" metadata, else 512
  int64_t stride = 0;              // 0: default_stride(window, merge)
  std::string merge = "blend";     // blend (raised-cosine weights) | max (Syn2Real protocol rule)
  std::string score = "page";      // page (calibrated page score if the weights have one) | window-max
  // Windows per forward pass; 0: kAutoBatchPixels / R² of them (8 at R = 256, 2 at 512, 1 at 768), the
  // batch that ran A4 pages fastest on the 2-core CPUs measured (docs/eval.md, "Windows per forward pass").
  int64_t batch = 0;
  std::string dct_source = "auto"; // auto (file for JPEG, pixels otherwise) | file | pixels
  double threshold = 0.5;          // pixel threshold: regions are {p > threshold} (and the overlay's floor)
  double page_threshold = -1;      // decision: image_score > page_threshold; < 0: page_threshold()'s default
  int64_t min_region_area = kDefaultMinRegionArea;
  int64_t region_gap = kDefaultRegionGap;  // regions join hot areas at most this many pixels apart
  int64_t max_pixels = 100'000'000;  // predict_file/predict_bytes refuse larger images before decoding
  std::string device = "cpu";      // cpu | cuda | cuda:N: the model is moved there, windows run there
  // f32 | bf16 (model and windows in bf16; the zero-sum filters, softmax and merging in f32) | auto (on a
  // CPU with native bf16, one batch timed in each at start-up and the faster kept; else f32).
  std::string precision = "f32";
  // With merge blend and a calibrated page score: windows that hold no content block are not run (the
  // score and the map on content pixels are the same; blank areas get p from the windows that overlap
  // them, else 0). false: every window runs.
  bool skip_blank = true;
  // Coarse-to-fine (merge blend with overlap only): a subset of the windows that covers the canvas (the
  // stride-R grid when the stride divides R) runs first; each other window runs only when that map
  // reaches the level somewhere inside it, so the overlap is spent where something was found; one not
  // run is stood in for by the coarse map blurred (no seams; docs/eval.md). < 0: the level is
  // `threshold` (chosen by measurement); 0: every window runs; at most 1.
  double refine = -1;
  // Coarse-to-fine: a window runs only when the coarse map reaches `refine` where the window's own blend
  // weight (the product of its blend_profile()s) is at least this; 0: anywhere inside it.
  double refine_core = 0;
  // 1..8: the page is box-averaged by this factor (box_reduce) before the windows run, its DCT then comes
  // from pixels, and the map is resized back: map, regions and overlay keep the page's own size. For scans
  // far finer than the 150-300 dpi the model is trained at (4 for 600 dpi; docs/eval.md "Scans at 600 dpi").
  // kDownscaleAuto: auto_downscale() of each page's size.
  int64_t downscale = kDownscaleAuto;
  // predict_bytes/predict_file/predict_rgb with the file's bytes: a file whose EXIF orientation tag (2..8)
  // asks viewers to turn or mirror it runs turned as they show it (the model is trained on upright pages),
  // its DCT then from those pixels with the file's table turned alike; the map, regions and overlay come
  // back in the stored orientation. false: the stored orientation, with orientation_warning().
  bool apply_exif_orientation = true;
};

// The factor PredictOptions::downscale = kDownscaleAuto gives a page: 1 while its shorter side is below
// 3,500 px (an A4 scan below about 425 dpi), 4 below 7,500 px (A4 at 600 dpi becomes 150 dpi), else 8.
int64_t auto_downscale(int64_t height, int64_t width);

// PredictOptions::downscale as the CLI and the records name it: "auto" or the factor ("1".."8").
inline std::string downscale_setting(int64_t downscale) {
  return downscale == kDownscaleAuto ? "auto" : std::to_string(downscale);
}
// The inverse: "auto" -> kDownscaleAuto, "1".."8" -> the factor; throws Error("downscale", ...) otherwise.
// (Inline: the service's request checks, a module without the model, use it too.)
inline int64_t parse_downscale(const std::string& text) {
  if (text == "auto") return kDownscaleAuto;
  if (text.size() == 1 && text[0] >= '1' && text[0] <= '8') return text[0] - '0';
  throw Error("downscale", "expected auto or an integer from 1 to 8, got '" + text + "'");
}

// PredictOptions::apply_exif_orientation from its name in the CLI and the Python module: "exif" -> true,
// "stored" -> false; throws Error("orientation", ...) otherwise.
inline bool parse_orientation(const std::string& text) {
  if (text == "exif" || text == "stored") return text == "exif";
  throw Error("orientation", "expected exif or stored, got '" + text + "'");
}

// Box average of an RGB uint8 (H, W, 3) image over f x f blocks: (ceil(H / f), ceil(W / f), 3); a block
// cut by the right or bottom edge averages the pixels it holds; rounded half up.
at::Tensor box_reduce(const at::Tensor& rgb, int64_t f);

// The warning a page gets when its shorter side reaches 3,500 px (an A4 scan at about 425 dpi or more)
// and it runs at full size (downscale 1, asked for); empty otherwise.
std::string high_resolution_warning(int64_t height, int64_t width, int64_t downscale);

// The warning a page gets when the model sees it in black and white: of its pixels darker than luma 192
// (print), fewer than 1 in 500 lie from 64 to 191, and at least 1 in 1,000 of all its pixels are that dark
// (a 1-bit scan, a fax, a copy thresholded to two levels); empty otherwise. Luma as rgb_to_luma (dct.h).
std::string black_and_white_warning(const at::Tensor& rgb);

// The warning a file gets when its EXIF orientation tag (1..8) asks viewers to turn or mirror it and the
// page runs in its stored orientation (PredictOptions::apply_exif_orientation false); empty for 1 and for
// values outside 1..8.
std::string orientation_warning(int exif_orientation);

struct PredictTimings {
  double decode_ms = 0, dct_ms = 0, model_ms = 0, total_ms = 0;
};

struct Prediction {
  std::string file;                // as given by the caller ("<file>#<page>" for a page of a PDF/TIFF)
  int64_t page = 0;                // 1-based page of a PDF/TIFF file (0: a JPEG/PNG file)
  std::string page_source;         // for pages: "pdf-jpeg" (the page's own JPEG) | "pdf-render" | "tiff"
  int64_t width = 0, height = 0;
  at::Tensor rgb;                  // the decoded image, uint8 (height, width, 3) (for overlays)
  at::Tensor prob;                 // float (height, width), tampering probability
  double image_score = 0;          // calibrated page probability, or (uncalibrated) max over windows of cls
  std::string score_kind;          // "calibrated" | "uncalibrated"
  double window_max = 0;           // max over the windows run of softmax(cls)[1] (all of them: the Syn2Real image score)
  PageStats page_stats;            // raw page statistics (the calibration's input)
  std::string decision;            // "tampered" (image_score > page_threshold) | "pristine"
  double page_threshold = 0.5;     // the decision's threshold (Predictor::page_threshold())
  double threshold = 0.5;          // the pixel threshold of the regions (PredictOptions::threshold)
  std::vector<Region> regions;     // find_regions(prob, threshold, min_region_area, region_gap)
  std::string dct_source;          // "file" | "pixels"
  int64_t jpeg_quality = -1;       // estimated IJG quality of the table used (-1: none, all-ones table)
  int64_t window = 0, stride = 0, num_windows = 0;
  int64_t skipped_windows = 0;     // of num_windows, not run: no content block (PredictOptions::skip_blank)
  int64_t cold_windows = 0;        // of num_windows, not run: the coarse map stayed below PredictOptions::refine
  double refine = 0;               // Predictor::refine()
  double refine_core = 0;          // Predictor::refine_core()
  int64_t downscale = 1;           // the factor the page ran at (windows, DCT and page_stats are of the reduced page)
  bool downscale_auto = false;     // the factor was auto_downscale()'s (PredictOptions::downscale = kDownscaleAuto)
  int orientation = 1;             // the EXIF orientation the page ran in (1: as stored; PredictOptions::apply_exif_orientation)
  std::string precision;           // "f32" | "bf16": what the model ran in
  std::string merge;               // "blend" | "max"
  std::vector<std::string> warnings;  // recoverable problems of the input file (e.g. stray JPEG bytes)
  PredictTimings timings;
};

// The JSON record of one prediction: file, (for pages of PDF/TIFF files: page, page_source), width, height, image_score, score_kind, decision, page_threshold, threshold,
// regions, page_stats, window_max, dct_source, jpeg_quality, window, stride, merge, precision, refine, refine_core, downscale, downscale_rule ("auto" | "fixed"), num_windows, skipped_windows, cold_windows, warnings,
// timings_ms {decode, dct, model, total}. A file name that is not UTF-8 is written with U+FFFD for each
// bad byte, plus "file_hex": the name's exact bytes in hex.
nlohmann::json prediction_to_json(const Prediction& p);

// The model plus where it came from.
struct LoadedModel {
  std::shared_ptr<DiffNetImpl> model;
  int64_t train_size = 0;  // metadata "train_size" (0 when absent)
  std::string source;      // weights path, or "random" for random weights
  std::optional<PageCalibration> calibration;  // metadata "calibration" (absent: uncalibrated)
};

// Where the shipped default weights are looked for, in order: $DIFFNET_WEIGHTS alone when set; else
// <prefix>/share/diffnet/weights/diffnet-atto.safetensors next to an installed <prefix>/bin/diffnet, then
// <source dir>/weights/diffnet-atto.safetensors (compile-time DIFFNET_SOURCE_DIR: the build tree).
std::vector<std::string> default_weights_candidates();
// The first candidate that exists (the last one when none does).
std::string default_weights_path();

// Loads `weights` (an error if it does not exist). With weights empty: the default weights; when none
// exists, an Error saying where it looked (an untrained model is only ever asked for: random_model).
LoadedModel load_weights(const std::string& weights);

// What a command's weights options choose: with `random`, an untrained `preset` model and a warning on
// stderr (an Error together with a weights path); otherwise load_weights(weights).
LoadedModel choose_weights(const std::string& weights, bool random, const std::string& preset = "atto");

// A randomly initialised model of `preset` (seed 0, source "random <preset>"), e.g. for timing.
LoadedModel random_model(const std::string& preset = "atto");

// An independent copy (own parameters and buffers, same values, dtype and device; same metadata): one per
// inference slot of the server, from one read of the weights file.
LoadedModel copy_model(const LoadedModel& model);

// Runs a model over whole images. Not thread-safe: one Predictor per thread (or a mutex).
class Predictor {
 public:
  Predictor(LoadedModel model, PredictOptions options);
  ~Predictor();
  Predictor(Predictor&&) noexcept;
  Predictor& operator=(Predictor&&) noexcept;

  // Decodes and predicts one file / one encoded image (JPEG or PNG). Errors name `name`.
  Prediction predict_file(const std::string& path);
  Prediction predict_bytes(const std::vector<uint8_t>& bytes, const std::string& name);
  // Predicts decoded pixels rgb uint8 (H, W, 3) (decoded as stored: not turned); `encoded` is the file as
  // stored (needed for the file DCT of a JPEG and for its EXIF orientation, PredictOptions::
  // apply_exif_orientation; may be empty, then the DCT comes from pixels with an all-ones table).
  Prediction predict_rgb(const at::Tensor& rgb, const std::vector<uint8_t>& encoded, const std::string& name);
  // One page of a DocumentReader: its bytes as stored when it has them (a JPEG keeps its coefficients),
  // else its pixels (DCT from pixels, all-ones table). Sets page and page_source.
  Prediction predict_page(const DocumentPage& page);

  const PredictOptions& options() const;
  // Changes options().downscale for the predictions that follow (kDownscaleAuto or 1..8; the service sets it
  // per request).
  void set_downscale(int64_t f);
  int64_t window() const;
  int64_t stride() const;          // the stride in use (options().stride, or its default)
  int64_t batch() const;           // windows per forward pass (options().batch, or the automatic one)
  // The coarse-to-fine level in use: with blend and overlap, options().refine (< 0: options().threshold); else 0.
  double refine() const;
  // The core weight in use: options().refine_core while refine() > 0, else 0.
  double refine_core() const;
  // The decision threshold in use: options().page_threshold when >= 0, else the calibration's threshold
  // when the page score is calibrated, else 0.5.
  double page_threshold() const;
  const at::Device& device() const;
  const std::string& precision() const;  // "f32" | "bf16" (options().precision resolved)
  const LoadedModel& model() const;

 private:
  // predict_bytes; exif false: the file's EXIF orientation tag is not read (a PDF page's JPEG).
  Prediction predict_encoded(const std::vector<uint8_t>& bytes, const std::string& name, bool exif);
  // predict_rgb; exif false: as predict_encoded.
  Prediction predict_oriented(const at::Tensor& rgb, const std::vector<uint8_t>& encoded, const std::string& name,
                              bool exif);
  // predict_rgb with, when `qt` is defined, the DCT from pixels with that table (a turned JPEG page).
  Prediction predict_view(const at::Tensor& rgb, const std::vector<uint8_t>& encoded, const at::Tensor& qt,
                          const std::string& name);
  Prediction predict_at_scale(const at::Tensor& rgb, const std::vector<uint8_t>& encoded, const at::Tensor& qt,
                              const std::string& name);
  // A file with EXIF orientation o (2..8) run turned as viewers show it, the result turned back.
  Prediction predict_turned(const at::Tensor& rgb, const std::vector<uint8_t>& bytes, const ImageInfo& info,
                            const std::string& name);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace diffnet
