#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>

#include <filesystem>

#include "diffnet/common.h"
#include "diffnet/dct.h"
#include "diffnet/device.h"
#include "diffnet/image_io.h"
#include "diffnet/model.h"
#include "diffnet/predict.h"

#ifndef DIFFNET_SOURCE_DIR
#define DIFFNET_SOURCE_DIR "."
#endif

namespace diffnet {

constexpr int64_t kDefaultWindow = 512;
constexpr int64_t kMaxTrainSize = 4096;  // larger windows are not a training size anyone uses

// Beyond predict.h's list: inside a shared object (the Python module), <prefix>/share/diffnet/weights/ for
// each of the 4 folders above it, after the executable's own prefix.
std::vector<std::string> default_weights_candidates() {
  if (const char* env = std::getenv("DIFFNET_WEIGHTS"); env && *env) return {env};
  std::vector<std::string> c;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && exe.has_parent_path())  // installed: <prefix>/bin/diffnet -> <prefix>/share/diffnet/weights/
    c.push_back((exe.parent_path().parent_path() / "share/diffnet/weights/diffnet-atto.safetensors").string());
  // This code inside a shared object (the Python module, <prefix>/lib/python3.X/dist-packages/diffnet*.so):
  // the prefix is a few folders up from it.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&default_weights_candidates), &info) && info.dli_fname &&
      std::string(info.dli_fname).find(".so") != std::string::npos) {
    std::filesystem::path dir = std::filesystem::absolute(info.dli_fname, ec).parent_path();
    if (!ec && dir != exe.parent_path())
      for (int up = 0; up < 4 && dir.has_parent_path() && dir != dir.root_path(); ++up, dir = dir.parent_path())
        c.push_back((dir / "share/diffnet/weights/diffnet-atto.safetensors").string());
  }
  c.push_back(std::string(DIFFNET_SOURCE_DIR) + "/weights/diffnet-atto.safetensors");  // the build tree's
  return c;
}

std::string default_weights_path() {
  const std::vector<std::string> c = default_weights_candidates();
  std::error_code ec;
  for (const auto& p : c)
    if (std::filesystem::is_regular_file(p, ec)) return p;
  return c.back();
}

namespace {

LoadedModel load_from_file(const std::string& path) {
  std::map<std::string, std::string> meta;
  DiffNet model = load_model(path, &meta);
  LoadedModel lm;
  lm.model = model.ptr();
  lm.source = path;
  if (auto it = meta.find("train_size"); it != meta.end()) {
    // The default window: a positive multiple of 32 the model can run (checked here, so a bad value is
    // reported as the file's, not as a --window error).
    size_t used = 0;
    try {
      lm.train_size = std::stoll(it->second, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != it->second.size())
      throw Error(path, "metadata train_size '" + it->second + "' is not an integer");
    if (lm.train_size < 32 || lm.train_size > kMaxTrainSize || lm.train_size % 32 != 0)
      throw Error(path, "metadata train_size " + it->second + " must be a multiple of 32 in [32, " +
                            std::to_string(kMaxTrainSize) + "]");
  }
  if (auto it = meta.find(kCalibrationKey); it != meta.end()) {
    nlohmann::json j = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw Error(path, "metadata calibration is not valid JSON");
    lm.calibration = PageCalibration::from_json(j, path);
  }
  return lm;
}

}  // namespace

LoadedModel load_weights(const std::string& weights) {
  std::error_code ec;
  if (!weights.empty()) {
    if (!std::filesystem::is_regular_file(weights, ec)) throw Error(weights, "weights file not found");
    return load_from_file(weights);
  }
  const std::vector<std::string> candidates = default_weights_candidates();
  for (const auto& p : candidates)
    if (std::filesystem::is_regular_file(p, ec)) return load_from_file(p);
  if (const char* env = std::getenv("DIFFNET_WEIGHTS"); env && *env)
    throw Error(env, "weights file named by $DIFFNET_WEIGHTS not found");
  std::string looked;
  for (const auto& p : candidates) looked += (looked.empty() ? "" : ", ") + p;
  throw Error("weights", "no model weights found (looked for " + looked +
                             "): name a weights file (--weights, $DIFFNET_WEIGHTS), or ask for an untrained model "
                             "explicitly (--random-weights: timing and tests only)");
}

LoadedModel choose_weights(const std::string& weights, bool random, const std::string& preset) {
  if (!random) return load_weights(weights);
  if (!weights.empty()) throw Error("weights", "a weights file and random weights exclude each other");
  std::fprintf(stderr, "warning: random weights (an untrained %s model): results are meaningless\n", preset.c_str());
  return random_model(preset);
}

LoadedModel copy_model(const LoadedModel& m) {
  if (!m.model) throw Error("copy_model", "no model");
  DiffNet src(m.model);
  DiffNet copy(src->config());
  const at::Tensor any = src->parameters().front();
  copy->to(any.device());
  if (any.scalar_type() != at::kFloat) copy->to(any.scalar_type());  // as Predictor converts for bf16
  load_model_state(copy, model_state(src));
  copy->train(src->is_training());
  LoadedModel r = m;
  r.model = copy.ptr();
  return r;
}

LoadedModel random_model(const std::string& preset) {
  torch::manual_seed(0);
  DiffNet model(model_preset(preset));
  LoadedModel lm;
  lm.model = model.ptr();
  lm.source = "random " + preset;
  return lm;
}

namespace {

// --precision auto on a CPU with native bf16: is bf16 faster here? It depends on the CPU and the model's
// size: on an AMD EPYC with AVX512-BF16, atto's windows run about 1.2x faster in bf16 and base 1.7x (with
// LayerNorm and GRN computing in float32: docs/model.md); LibTorch 1.13's own bf16 kernels had made
// atto 1.6x slower there. One batch of synthetic windows is timed in each dtype (best of 3 after a
// warm-up); bf16 is kept only if at least 10 % faster. The model is left in the winner's dtype, its f32
// weights restored exactly when f32 wins.
std::string measure_precision(const std::shared_ptr<DiffNetImpl>& model, int64_t window, int64_t batch) {
  torch::NoGradGuard no_grad;
  at::Tensor canvas = at::randint(0, 256, {window, window, 3}, at::kByte);
  at::Tensor qt1 = ones_table();
  at::Tensor dct = pixel_dct(canvas, qt1).unsqueeze(0).expand({batch, window, window}).contiguous();
  at::Tensor x = normalize_rgb(canvas.unsqueeze(0).expand({batch, window, window, 3}).contiguous());
  at::Tensor qt = qt1.view({1, 64}).expand({batch, 64}).contiguous();
  auto best_ms = [&](at::ScalarType dtype) {
    double best = 1e300;
    for (int i = 0; i < 4; ++i) {
      const double t0 = now_seconds();
      model->forward(x.to(dtype), dct, qt);
      if (i > 0) best = std::min(best, (now_seconds() - t0) * 1e3);
    }
    return best;
  };
  DiffNet holder(model);
  std::map<std::string, at::Tensor> f32;
  for (auto& kv : model_state(holder)) f32[kv.first] = kv.second.clone();
  const double ms32 = best_ms(at::kFloat);
  model->to(at::kBFloat16);
  const double ms16 = best_ms(at::kBFloat16);
  if (ms16 < 0.9 * ms32) return "bf16";
  model->to(at::kFloat);
  load_model_state(holder, f32);
  return "f32";
}

}  // namespace

struct Predictor::Impl {
  LoadedModel lm;
  PredictOptions opt;
  int64_t window = 0, stride = 0, batch = 0;
  bool calibrated = false;        // the page score is the calibrated one (score "page", weights with one)
  double page_threshold = 0.5;    // options().page_threshold resolved
  at::Device device = at::kCPU;
  std::string precision = "f32";  // options().precision resolved
};

Predictor::Predictor(LoadedModel model, PredictOptions options) : impl_(std::make_unique<Impl>()) {
  if (!model.model) throw Error("Predictor", "no model");
  impl_->lm = std::move(model);
  impl_->opt = std::move(options);
  const PredictOptions& o = impl_->opt;
  impl_->window = o.window > 0 ? o.window : (impl_->lm.train_size > 0 ? impl_->lm.train_size : kDefaultWindow);
  if (o.merge != "blend" && o.merge != "max") throw Error("merge", "expected blend or max, got '" + o.merge + "'");
  if (o.score != "page" && o.score != "window-max")
    throw Error("score", "expected page or window-max, got '" + o.score + "'");
  impl_->stride = o.stride > 0 ? o.stride : default_stride(impl_->window, o.merge);
  window_origins(impl_->window, impl_->window, impl_->stride);  // validates window and stride
  if (o.batch < 0) throw Error("batch", "must be >= 1, or 0 for the automatic batch");
  impl_->batch = o.batch > 0 ? o.batch : std::max<int64_t>(1, kAutoBatchPixels / (impl_->window * impl_->window));
  if (!(o.refine <= 1)) throw Error("refine", "must be at most 1 (0: every window runs; < 0: the pixel threshold)");
  if (!(o.refine_core >= 0 && o.refine_core <= 1)) throw Error("refine_core", "must be in [0, 1]");
  set_downscale(o.downscale);
  if (o.region_gap < 0) throw Error("region_gap", "must be >= 0");
  if (o.dct_source != "auto" && o.dct_source != "file" && o.dct_source != "pixels")
    throw Error("dct_source", "expected auto, file or pixels, got '" + o.dct_source + "'");
  if (!(o.threshold >= 0 && o.threshold < 1)) throw Error("threshold", "must be in [0, 1)");
  if (!(o.page_threshold < 1)) throw Error("page_threshold", "must be in [0, 1), or < 0 for the weights' default");
  impl_->calibrated = o.score == "page" && impl_->lm.calibration;
  impl_->page_threshold =
      o.page_threshold >= 0 ? o.page_threshold : impl_->calibrated ? impl_->lm.calibration->threshold : 0.5;
  impl_->device = parse_device(o.device);
  // /proc/cpuinfo is read only when auto asks for it (every Predictor is made with a precision).
  impl_->precision = resolve_precision(o.precision, impl_->device, o.precision == "auto" && cpu_has_native_bf16());
  impl_->lm.model->to(impl_->device);
  impl_->lm.model->eval();
  // bf16: the weights converted (the zero-sum filters run in float32: src/model/discrepancy.cpp).
  if (impl_->precision == "measure")
    impl_->precision = measure_precision(impl_->lm.model, impl_->window, impl_->batch);
  else if (impl_->precision == "bf16")
    impl_->lm.model->to(at::kBFloat16);
}

Predictor::~Predictor() = default;
Predictor::Predictor(Predictor&&) noexcept = default;
Predictor& Predictor::operator=(Predictor&&) noexcept = default;

const PredictOptions& Predictor::options() const { return impl_->opt; }
void Predictor::set_downscale(int64_t f) {
  if (f != kDownscaleAuto && (f < 1 || f > 8)) throw Error("downscale", "must be auto or an integer from 1 to 8");
  impl_->opt.downscale = f;
}
int64_t Predictor::window() const { return impl_->window; }
int64_t Predictor::stride() const { return impl_->stride; }
int64_t Predictor::batch() const { return impl_->batch; }
double Predictor::refine() const {
  const PredictOptions& o = impl_->opt;
  return o.merge == "blend" && impl_->stride < impl_->window ? (o.refine < 0 ? o.threshold : o.refine) : 0.0;
}
double Predictor::refine_core() const { return refine() > 0 ? impl_->opt.refine_core : 0.0; }
double Predictor::page_threshold() const { return impl_->page_threshold; }
const at::Device& Predictor::device() const { return impl_->device; }
const std::string& Predictor::precision() const { return impl_->precision; }
const LoadedModel& Predictor::model() const { return impl_->lm; }

Prediction Predictor::predict_file(const std::string& path) { return predict_bytes(read_file(path), path); }

Prediction Predictor::predict_bytes(const std::vector<uint8_t>& bytes, const std::string& name) {
  return predict_encoded(bytes, name, true);
}

Prediction Predictor::predict_encoded(const std::vector<uint8_t>& bytes, const std::string& name, bool exif) {
  double t0 = now_seconds();
  DecodeOptions dopt;
  dopt.max_pixels = impl_->opt.max_pixels;
  std::vector<std::string> warnings;
  dopt.warnings = &warnings;
  at::Tensor rgb = decode_image_bytes(bytes, name, dopt);
  double decode_ms = (now_seconds() - t0) * 1e3;
  Prediction p = predict_oriented(rgb, bytes, name, exif);
  for (const std::string& w : p.warnings)  // the coefficient read repeats the decoder's warnings
    if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
  p.warnings = std::move(warnings);
  p.timings.decode_ms = decode_ms;
  p.timings.total_ms += decode_ms;
  return p;
}

Prediction Predictor::predict_turned(const at::Tensor& rgb, const std::vector<uint8_t>& bytes, const ImageInfo& info,
                                     const std::string& name) {
  const int o = info.exif_orientation;
  if (impl_->opt.dct_source == "file")
    throw Error(name, "EXIF orientation " + std::to_string(o) +
                          ": the file's coefficients are on its stored grid, so --dct-source file cannot run it "
                          "turned; use --dct-source auto or pixels, or --orientation stored");
  const int64_t H = rgb.size(0), W = rgb.size(1);
  // A JPEG's traces lie on its stored 8x8 grid. Turning reverses the stored rows for o = 3, 4, 6, 7 and the
  // columns for o = 2, 3, 7, 8, which would put a partial last block first and shift the grid; that part
  // (under 8 px) is left out of the run and its map is 0.
  const bool jpeg = !info.luma_qtable.empty();
  const bool rows_reversed = o == 3 || o == 4 || o == 6 || o == 7, cols_reversed = o == 2 || o == 3 || o == 7 || o == 8;
  const int64_t h = jpeg && rows_reversed ? H / 8 * 8 : H, w = jpeg && cols_reversed ? W / 8 * 8 : W;
  if (h == 0 || w == 0) {  // under one block: nothing on a grid to keep
    Prediction p = predict_view(rgb, bytes, at::Tensor(), name);
    p.warnings.push_back(orientation_warning(o));
    return p;
  }
  at::Tensor qt;  // the table of the turned page: the file's, transposed when rows and columns swap
  if (jpeg) {
    qt = at::tensor(info.luma_qtable, at::kLong);
    if (o >= 5) qt = qt.view({8, 8}).t().contiguous().view({64});
  }
  Prediction p = predict_view(orient_image(rgb.slice(0, 0, h).slice(1, 0, w), o), {}, qt, name);
  at::Tensor prob = at::zeros({H, W}, at::kFloat);
  prob.slice(0, 0, h).slice(1, 0, w).copy_(orient_image(p.prob, inverse_orientation(o)));
  p.prob = prob;
  p.rgb = rgb;
  p.width = W;
  p.height = H;
  p.orientation = o;
  p.regions = find_regions(p.prob, impl_->opt.threshold, impl_->opt.min_region_area, impl_->opt.region_gap);
  return p;
}

Prediction Predictor::predict_page(const DocumentPage& page) {
  // A PDF's embedded JPEG is shown as stored whatever EXIF it carries: its tag is not read.
  Prediction p = page.encoded.empty() ? predict_rgb(page.rgb, {}, page.name)
                                      : predict_encoded(page.encoded, page.name, page.source != "pdf-jpeg");
  p.page = page.page;
  if (page.page > 0) p.page_source = page.source;
  if (page.born_digital) p.warnings.push_back(kBornDigitalWarning);
  return p;
}

namespace {

// The DCT map (Hp, Wp) uint8 and luma table (64) int64 for the padded canvas.
struct DctInput {
  at::Tensor dct, qt;
  std::string source;
};

// qt defined: the DCT from pixels with that table (a turned JPEG page: the file's table turned alike).
DctInput make_dct(const at::Tensor& canvas, int64_t H, int64_t W, const std::vector<uint8_t>& encoded,
                  const at::Tensor& qt, const std::string& name, const std::string& wanted, int64_t max_pixels,
                  std::vector<std::string>* warnings) {
  if (qt.defined()) return {pixel_dct(canvas, qt), qt, "pixels"};
  DecodeOptions dopt;
  dopt.max_pixels = max_pixels;
  dopt.warnings = warnings;
  const bool jpeg = !encoded.empty() && is_jpeg_bytes(encoded.data(), encoded.size());
  DctInput d;
  d.source = wanted == "auto" ? (jpeg ? "file" : "pixels") : wanted;
  if (d.source == "file" && !jpeg) throw Error(name, "--dct-source file needs a JPEG input");
  const int64_t Hp = canvas.size(0), Wp = canvas.size(1);
  if (d.source == "pixels") {
    // TDoc protocol: coefficients recomputed from pixels; the table is the file's for a JPEG, else ones.
    d.qt = jpeg ? read_jpeg_coefficients_bytes(encoded, name, dopt).qt : ones_table();
    d.dct = pixel_dct(canvas, d.qt);
    return d;
  }
  JpegCoefficients jc = read_jpeg_coefficients_bytes(encoded, name, dopt);
  if (jc.width != W || jc.height != H)
    throw Error(name, "JPEG coefficient grid " + std::to_string(jc.width) + "x" + std::to_string(jc.height) +
                          " does not match the decoded image " + std::to_string(W) + "x" + std::to_string(H));
  d.qt = jc.qt;
  // Padding blocks get the coefficients of a white block (as the white-padded pixels would); the
  // image's own blocks (up to the next multiple of 8) come from the file.
  at::Tensor white_block = pixel_dct(at::full({8, 8, 3}, 255, at::kByte), d.qt);
  d.dct = white_block.repeat({Hp / 8, Wp / 8}).contiguous();
  const int64_t h8 = std::min((H + 7) / 8 * 8, Hp), w8 = std::min((W + 7) / 8 * 8, Wp);
  d.dct.slice(0, 0, h8).slice(1, 0, w8).copy_(clip_coefficients(jc.coef, h8, w8));
  return d;
}

// Separable Gaussian blur of a float (H, W) map: kernel exp(-t^2 / (2 sigma^2)) over |t| <= ceil(3 sigma),
// normalised; the map's edge pixels are repeated outwards.
at::Tensor blur_map(const at::Tensor& map, double sigma) {
  const int64_t r = std::max<int64_t>(1, int64_t(std::ceil(3 * sigma)));
  at::Tensor t = at::arange(-r, r + 1, at::kDouble);
  at::Tensor k = (t * t / (-2 * sigma * sigma)).exp();
  k = (k / k.sum()).to(at::kFloat);
  at::Tensor x = at::replication_pad2d(map.unsqueeze(0).unsqueeze(0), {r, r, r, r});
  x = at::conv2d(x, k.view({1, 1, 1, 2 * r + 1}));
  x = at::conv2d(x, k.view({1, 1, 2 * r + 1, 1}));
  return x.view({map.size(0), map.size(1)});
}

// The coarse pass's origins on one axis: from the planned `origins` (ascending, the first 0, the last ending
// at the border), greedily the farthest one that leaves no gap after the previous window of size R. For
// a stride that divides R: 0, R, 2R, ... and the last one.
std::vector<int64_t> covering_origins(const std::vector<int64_t>& origins, int64_t R) {
  std::vector<int64_t> out = {origins.front()};
  size_t i = 0;
  while (i + 1 < origins.size()) {
    size_t j = i + 1;
    while (j + 1 < origins.size() && origins[j + 1] <= origins[i] + R) ++j;
    out.push_back(origins[j]);
    i = j;
  }
  return out;
}

// Whether the window at w (size R) holds a content block; blocks: content_blocks of the canvas.
bool window_has_content(const at::Tensor& blocks, const WindowPos& w, int64_t R) {
  return blocks.slice(0, w.y / 8, (w.y + R) / 8).slice(1, w.x / 8, (w.x + R) / 8).any().item<bool>();
}

// Page statistics: content = dilated non-uniform 8x8 blocks of the padded canvas, cropped to the image;
// pixel quantiles of the map over content pixels; cls over the windows that hold any content block
// (window_content[i]: window_has_content of the window of window_cls[i]).
PageStats compute_page_stats(const at::Tensor& blocks, const at::Tensor& prob, const std::vector<bool>& window_content,
                             const std::vector<double>& window_cls) {
  // blocks: content_blocks of the canvas, (Hp/8, Wp/8).
  const int64_t H = prob.size(0), W = prob.size(1);
  PageStats s;
  // One pass over the map: both quantiles and the number of content pixels inside the image.
  const MaskedQuantiles mq = masked_quantiles(prob, blocks, {0.99, 0.999}, 8);
  s.content_fraction = double(mq.count) / double(H * W);
  s.q99 = mq.values[0];
  s.q999 = mq.values[1];
  std::vector<double> content_cls;
  for (size_t i = 0; i < window_cls.size(); ++i)
    if (window_content[i]) content_cls.push_back(window_cls[i]);
  s.content_windows = int64_t(content_cls.size());
  const std::vector<double>& used = content_cls.empty() ? window_cls : content_cls;  // blank page: all windows
  double mx = 0, sum = 0;
  for (double c : used) mx = std::max(mx, c), sum += c;
  s.cls_max = mx;
  s.cls_mean = used.empty() ? 0 : sum / double(used.size());
  return s;
}

}  // namespace

at::Tensor box_reduce(const at::Tensor& rgb, int64_t f) {
  if (rgb.dim() != 3 || rgb.size(2) != 3 || rgb.scalar_type() != at::kByte)
    throw Error("box_reduce", "expected an RGB uint8 (H, W, 3) image");
  if (f < 1) throw Error("box_reduce", "factor must be >= 1");
  if (f == 1) return rgb;
  // avg_pool2d with ceil_mode: a block cut by the edge divides by the pixels it holds (no padding).
  const at::Tensor x = rgb.permute({2, 0, 1}).unsqueeze(0).to(at::kFloat);
  const at::Tensor y = at::avg_pool2d(x, {f, f}, {f, f}, {0, 0}, /*ceil_mode=*/true, /*count_include_pad=*/false);
  return (y + 0.5f).floor().clamp(0, 255).to(at::kByte)[0].permute({1, 2, 0}).contiguous();
}

int64_t auto_downscale(int64_t height, int64_t width) {
  const int64_t s = std::min(height, width);
  return s < 3500 ? 1 : s < 7500 ? 4 : 8;
}

std::string high_resolution_warning(int64_t height, int64_t width, int64_t downscale) {
  if (downscale != 1 || auto_downscale(height, width) == 1) return {};
  return "page of " + std::to_string(width) + " x " + std::to_string(height) +
         " px, as a scan at 400 dpi or more would be, run at full size: the model is trained and validated on "
         "150-300 dpi scans and flags ordinary print at 600 dpi; --downscale auto (the default) runs it at 1/" +
         std::to_string(auto_downscale(height, width)) + " of the size, --downscale 4 at a quarter "
         "(docs/eval.md, \"Scans at 600 dpi\")";
}

std::string black_and_white_warning(const at::Tensor& rgb) {
  const at::Tensor luma = rgb_to_luma(rgb);
  const uint8_t* l = luma.data_ptr<uint8_t>();
  int64_t dark = 0, grey = 0;  // luma < 192; of them, >= 64
  for (int64_t i = 0, n = luma.numel(); i < n; ++i) {
    dark += l[i] < 192;
    grey += l[i] >= 64 && l[i] < 192;
  }
  if (dark == 0 || dark * 1000 < luma.numel()) return {};  // blank, or next to no print
  if (grey * 500 >= dark) return {};
  return "black-and-white page (print and paper, almost no grey between): the model is trained and validated "
         "on greyscale and colour scans, and flags black-and-white copies of them whether edited or not (40 of "
         "50 untouched held-out receipts); a page score on such a page says little (docs/eval.md, "
         "\"Black-and-white pages\")";
}

std::string orientation_warning(int exif_orientation) {
  static const char* const kShown[] = {"mirrored left to right", "turned 180 degrees", "mirrored top to bottom",
                                       "mirrored about its main diagonal", "turned 90 degrees clockwise",
                                       "mirrored about its other diagonal", "turned 90 degrees anticlockwise"};
  if (exif_orientation < 2 || exif_orientation > 8) return {};
  return "EXIF orientation " + std::to_string(exif_orientation) + ": viewers that honour the tag show this page " +
         kShown[exif_orientation - 2] +
         "; it ran as stored (--orientation stored), so the map, regions and overlay are in the stored "
         "orientation, and text lying sideways or upside down there was read that way: the model is trained on "
         "upright pages and finds few edits on sideways ones (docs/eval.md, \"Pages stored sideways or upside "
         "down\")";
}

Prediction Predictor::predict_rgb(const at::Tensor& rgb, const std::vector<uint8_t>& encoded, const std::string& name) {
  return predict_oriented(rgb, encoded, name, true);
}

Prediction Predictor::predict_oriented(const at::Tensor& rgb, const std::vector<uint8_t>& encoded,
                                       const std::string& name, bool exif) {
  ImageInfo info;
  if (exif && (is_jpeg_bytes(encoded.data(), encoded.size()) || is_png_bytes(encoded.data(), encoded.size()))) {
    DecodeOptions header;
    header.max_pixels = impl_->opt.max_pixels;
    info = read_image_info_bytes(encoded, name, header);
  }
  const std::string warning = orientation_warning(info.exif_orientation);
  if (!warning.empty() && impl_->opt.apply_exif_orientation) return predict_turned(rgb, encoded, info, name);
  Prediction p = predict_view(rgb, encoded, at::Tensor(), name);
  if (!warning.empty()) p.warnings.push_back(warning);
  return p;
}

Prediction Predictor::predict_view(const at::Tensor& rgb, const std::vector<uint8_t>& encoded, const at::Tensor& qt,
                                   const std::string& name) {
  torch::NoGradGuard no_grad;
  if (rgb.dim() != 3 || rgb.size(2) != 3 || rgb.scalar_type() != at::kByte)
    throw Error(name, "expected an RGB uint8 (H, W, 3) image");
  const int64_t H = rgb.size(0), W = rgb.size(1);
  const bool automatic = impl_->opt.downscale == kDownscaleAuto;
  const int64_t f = automatic ? auto_downscale(H, W) : impl_->opt.downscale;
  if (f == 1) {
    Prediction p = predict_at_scale(rgb, encoded, qt, name);
    p.downscale_auto = automatic;
    const std::string w = high_resolution_warning(H, W, impl_->opt.downscale);
    if (!w.empty()) p.warnings.push_back(w);
    return p;
  }
  // The reduced page runs as decoded pixels (DCT from pixels); the map comes back at the page's size and
  // the regions are found there.
  const double t0 = now_seconds();
  Prediction p = predict_at_scale(box_reduce(rgb, f), {}, at::Tensor(), name);
  p.downscale = f;
  p.downscale_auto = automatic;
  p.width = W;
  p.height = H;
  p.rgb = rgb;
  p.prob = at::upsample_bilinear2d(p.prob.unsqueeze(0).unsqueeze(0), {H, W}, /*align_corners=*/false)[0][0].contiguous();
  p.regions = find_regions(p.prob, impl_->opt.threshold, impl_->opt.min_region_area, impl_->opt.region_gap);
  p.timings.total_ms = (now_seconds() - t0) * 1e3;
  return p;
}

Prediction Predictor::predict_at_scale(const at::Tensor& rgb, const std::vector<uint8_t>& encoded,
                                       const at::Tensor& qt, const std::string& name) {
  const double t0 = now_seconds();
  const int64_t H = rgb.size(0), W = rgb.size(1);
  const int64_t R = impl_->window, S = impl_->stride;
  const int64_t Hp = padded_extent(H, R), Wp = padded_extent(W, R);

  Prediction p;
  p.file = name;
  p.width = W;
  p.height = H;
  p.window = R;
  p.stride = S;

  // White canvas, image at the top-left: right/bottom padding keeps the 8x8 grid.
  at::Tensor canvas = at::full({Hp, Wp, 3}, 255, at::kByte);
  canvas.slice(0, 0, H).slice(1, 0, W).copy_(rgb);
  DctInput d = make_dct(canvas, H, W, encoded, qt, name, impl_->opt.dct_source, impl_->opt.max_pixels, &p.warnings);
  if (std::string w = black_and_white_warning(rgb); !w.empty()) p.warnings.push_back(std::move(w));
  p.dct_source = d.source;
  if (!(d.source == "pixels" && d.qt.eq(1).all().item<bool>())) p.jpeg_quality = estimate_jpeg_quality(d.qt);
  const double t1 = now_seconds();

  const at::Tensor blocks = content_blocks(canvas);
  std::vector<WindowPos> windows = plan_windows(H, W, R, S);
  p.num_windows = int64_t(windows.size());
  p.merge = impl_->opt.merge;
  p.precision = impl_->precision;
  const at::ScalarType dtype = impl_->precision == "bf16" ? at::kBFloat16 : at::kFloat;
  const bool blend = impl_->opt.merge == "blend";
  // Windows without a content block (blank paper, margins, padding) do not change the calibrated page
  // score nor the blended map on content pixels: every window over a content pixel holds its block.
  // They are not run when that is the score; a blank page runs them all.
  std::vector<bool> content;  // per window (of those run): holds a content block
  for (const WindowPos& w : windows) content.push_back(window_has_content(blocks, w, R));
  const size_t num_content = size_t(std::count(content.begin(), content.end(), true));
  if (impl_->opt.skip_blank && blend && impl_->calibrated && num_content > 0) {
    std::vector<WindowPos> run;
    for (size_t i = 0; i < windows.size(); ++i)
      if (content[i]) run.push_back(windows[i]);
    windows = std::move(run);
    content.assign(windows.size(), true);
  }
  p.skipped_windows = p.num_windows - int64_t(windows.size());
  // One canvas-sized accumulator: the max-merge canvas, or the blender's sums.
  at::Tensor merged = blend ? at::Tensor() : at::zeros({Hp, Wp}, at::kFloat);
  BlendMerger blender(blend ? Hp : 0, blend ? Wp : 0);
  std::vector<double> window_cls;
  DiffNetImpl& model = *impl_->lm.model;
  // Runs windows[from, to) in batches, merging their maps and appending their cls to window_cls.
  auto run = [&](size_t from, size_t to) {
    for (size_t b0 = from; b0 < to; b0 += size_t(impl_->batch)) {
      size_t b1 = std::min(to, b0 + size_t(impl_->batch));
      std::vector<at::Tensor> rgbs, dcts;
      for (size_t i = b0; i < b1; ++i) {
        rgbs.push_back(canvas.slice(0, windows[i].y, windows[i].y + R).slice(1, windows[i].x, windows[i].x + R));
        dcts.push_back(d.dct.slice(0, windows[i].y, windows[i].y + R).slice(1, windows[i].x, windows[i].x + R));
      }
      const int64_t B = int64_t(b1 - b0);
      const at::Device dev = impl_->device;
      at::Tensor x = normalize_rgb(at::stack(rgbs).to(dev)).to(dtype);
      at::Tensor qt = d.qt.view({1, 64}).expand({B, 64}).contiguous().to(dev);
      DiffNetOutput out = model.forward(x, at::stack(dcts).to(dev), qt);
      // Window maps are merged on the CPU.
      at::Tensor prob = out.seg_logits.softmax(1).select(1, 1).to(at::kCPU, at::kFloat);
      at::Tensor cls = out.cls_logits.softmax(1).select(1, 1).to(at::kCPU, at::kFloat);
      for (int64_t i = 0; i < B; ++i) {
        if (blend) blender.add(prob[i], windows[b0 + size_t(i)]);
        else max_merge(merged, prob[i], windows[b0 + size_t(i)]);
        window_cls.push_back(cls[i].item<double>());
      }
    }
  };
  p.refine = refine();
  p.refine_core = refine_core();
  if (p.refine > 0) {
    // Coarse-to-fine: a subset of the windows that covers the canvas first (the stride-R grid when S
    // divides R), then the others where that map reaches `refine` (with refine_core > 0: where it does
    // so at a pixel of the window's weight >= refine_core). A window not run is stood in for by
    // the coarse map blurred (Gaussian, sigma R/32) over its area, blended with its usual weight: the
    // steps where coarse windows meet become ramps (no seams).
    const std::vector<int64_t> ys = covering_origins(window_origins(Hp, R, S), R),
                               xs = covering_origins(window_origins(Wp, R, S), R);
    auto coarse = [&](const WindowPos& w) {
      return std::binary_search(ys.begin(), ys.end(), w.y) && std::binary_search(xs.begin(), xs.end(), w.x);
    };
    // Windows and their content flags in run order: the coarse ones, then the others that turn out hot.
    std::vector<WindowPos> others;
    std::vector<bool> others_content;
    const std::vector<WindowPos> planned = std::move(windows);
    const std::vector<bool> planned_content = std::move(content);
    windows.clear(), content.clear();
    for (size_t i = 0; i < planned.size(); ++i) {
      const bool in_first_pass = coarse(planned[i]);
      (in_first_pass ? windows : others).push_back(planned[i]);
      (in_first_pass ? content : others_content).push_back(planned_content[i]);
    }
    const size_t num_coarse = windows.size();
    run(0, num_coarse);
    const at::Tensor first = blender.current();
    std::vector<WindowPos> stand_ins;
    for (size_t i = 0; i < others.size(); ++i) {
      const WindowPos& w = others[i];
      at::Tensor area = first.slice(0, w.y, w.y + R).slice(1, w.x, w.x + R);
      if (p.refine_core > 0)
        area = area.masked_fill(window_weight(R, R, w, first.size(0), first.size(1)).lt(p.refine_core), 0.0);
      if (area.max().item<double>() >= p.refine)
        windows.push_back(w), content.push_back(others_content[i]);
      else
        stand_ins.push_back(w);
    }
    p.cold_windows = int64_t(stand_ins.size());
    run(num_coarse, windows.size());
    if (!stand_ins.empty()) {
      const at::Tensor smooth = blur_map(first, double(R) / 32);
      for (const WindowPos& w : stand_ins) blender.add(smooth.slice(0, w.y, w.y + R).slice(1, w.x, w.x + R), w);
    }
  } else {
    run(0, windows.size());
  }
  if (blend) merged = blender.take();
  const double t2 = now_seconds();

  // Page-sized buffers are released as soon as they are spent (peak memory on big scans).
  canvas = at::Tensor();
  d = DctInput();
  p.rgb = rgb;
  p.prob = merged.slice(0, 0, H).slice(1, 0, W).contiguous();
  merged = at::Tensor();
  p.window_max = *std::max_element(window_cls.begin(), window_cls.end());
  p.page_stats = compute_page_stats(blocks, p.prob, content, window_cls);
  if (impl_->calibrated) {
    const PageCalibration& cal = *impl_->lm.calibration;
    p.image_score = cal.apply(page_stat(p.page_stats, cal.statistic));
    p.score_kind = "calibrated";
  } else {
    p.image_score = p.window_max;
    p.score_kind = "uncalibrated";
  }
  p.page_threshold = impl_->page_threshold;
  p.threshold = impl_->opt.threshold;
  p.decision = p.image_score > p.page_threshold ? "tampered" : "pristine";
  p.regions = find_regions(p.prob, impl_->opt.threshold, impl_->opt.min_region_area, impl_->opt.region_gap);
  const double t3 = now_seconds();
  p.timings.dct_ms = (t1 - t0) * 1e3;
  p.timings.model_ms = (t2 - t1) * 1e3;
  p.timings.total_ms = (t3 - t0) * 1e3;
  return p;
}

nlohmann::json prediction_to_json(const Prediction& p) {
  nlohmann::json regions = nlohmann::json::array();
  for (const Region& r : p.regions) regions.push_back(region_to_json(r));
  nlohmann::json j;
  j["file"] = valid_utf8(p.file);
  if (j["file"].get_ref<const std::string&>() != p.file) j["file_hex"] = hex_bytes(p.file);  // exact bytes
  if (p.page > 0) {
    j["page"] = p.page;
    j["page_source"] = p.page_source;
  }
  j["width"] = p.width;
  j["height"] = p.height;
  j["image_score"] = p.image_score;
  j["score_kind"] = p.score_kind;
  j["decision"] = p.decision;
  j["page_threshold"] = p.page_threshold;
  j["threshold"] = p.threshold;
  j["regions"] = std::move(regions);
  j["page_stats"] = page_stats_to_json(p.page_stats);
  j["window_max"] = p.window_max;
  j["dct_source"] = p.dct_source;
  j["jpeg_quality"] = p.jpeg_quality;
  j["window"] = p.window;
  j["stride"] = p.stride;
  j["refine"] = p.refine;
  j["refine_core"] = p.refine_core;
  j["downscale"] = p.downscale;
  j["downscale_rule"] = p.downscale_auto ? "auto" : "fixed";
  if (p.orientation != 1) j["orientation"] = p.orientation;
  j["merge"] = p.merge;
  j["precision"] = p.precision;
  j["num_windows"] = p.num_windows;
  j["skipped_windows"] = p.skipped_windows;
  j["cold_windows"] = p.cold_windows;
  j["warnings"] = p.warnings;
  j["timings_ms"] = {{"decode", p.timings.decode_ms},
                     {"dct", p.timings.dct_ms},
                     {"model", p.timings.model_ms},
                     {"total", p.timings.total_ms}};
  return j;
}

}  // namespace diffnet
