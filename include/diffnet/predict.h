// Whole-image inference (DESIGN §3–§4): R x R windows on the JPEG 8x8 grid, batched forward passes,
// max-merged tampering probabilities, image score = max over windows of softmax(cls)[1].
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "diffnet/regions.h"

namespace diffnet {

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

// ---- Inputs ---------------------------------------------------------------------------------------

// Image files (.jpg, .jpeg, .png; case-insensitive) directly inside dir, sorted by file name.
// Throws Error(dir, ...) when dir is not a readable directory.
std::vector<std::string> list_image_files(const std::string& dir);

// ---- Predictor ------------------------------------------------------------------------------------

struct PredictOptions {
  int64_t window = 0;              // R; 0: the weights' "train_size" metadata, else 512
  int64_t stride = 0;              // 0: = window (no overlap)
  int64_t batch = 2;               // windows per forward pass
  std::string dct_source = "auto"; // auto (file for JPEG, pixels otherwise) | file | pixels
  double threshold = 0.5;          // decision and region threshold
  int64_t min_region_area = kDefaultMinRegionArea;
  int64_t max_pixels = 100'000'000;  // predict_file/predict_bytes refuse larger images before decoding
  std::string device = "cpu";      // cpu | cuda | cuda:N: the model is moved there, windows run there
};

struct PredictTimings {
  double decode_ms = 0, dct_ms = 0, model_ms = 0, total_ms = 0;
};

struct Prediction {
  std::string file;                // as given by the caller
  int64_t width = 0, height = 0;
  at::Tensor rgb;                  // the decoded image, uint8 (height, width, 3) (for overlays)
  at::Tensor prob;                 // float (height, width), tampering probability
  double image_score = 0;          // max over windows of softmax(cls)[1]
  std::string decision;            // "tampered" (image_score > threshold) | "pristine"
  std::vector<Region> regions;     // find_regions(prob, threshold, min_region_area)
  std::string dct_source;          // "file" | "pixels"
  int64_t jpeg_quality = -1;       // estimated IJG quality of the table used (-1: none, all-ones table)
  int64_t window = 0, stride = 0, num_windows = 0;
  PredictTimings timings;
};

// The JSON record of one prediction: file, width, height, image_score, decision, threshold, regions,
// dct_source, jpeg_quality, window, stride, num_windows, timings_ms {decode, dct, model, total}.
nlohmann::json prediction_to_json(const Prediction& p, double threshold);

// The model plus where it came from.
struct LoadedModel {
  std::shared_ptr<DiffNetImpl> model;
  int64_t train_size = 0;  // metadata "train_size" (0 when absent)
  std::string source;      // weights path, or "random" for random weights
};

// Path of the shipped default weights: $DIFFNET_WEIGHTS when set, else
// <source dir>/weights/diffnet-atto.safetensors (compile-time DIFFNET_SOURCE_DIR).
std::string default_weights_path();

// Loads `weights` (an error if it does not exist). With weights empty: the default path when that file
// exists, otherwise a randomly initialised atto model (seed 0) after printing a warning
// "no weights found: using random weights, results are meaningless" on stderr.
LoadedModel load_weights_or_random(const std::string& weights);

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
  // Predicts decoded pixels rgb uint8 (H, W, 3); `encoded` is the file as stored (needed for the file
  // DCT of a JPEG; may be empty, then the DCT comes from pixels with an all-ones table).
  Prediction predict_rgb(const at::Tensor& rgb, const std::vector<uint8_t>& encoded, const std::string& name);

  const PredictOptions& options() const;
  int64_t window() const;
  const LoadedModel& model() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace diffnet
