// Tampering-localisation metrics (docs/design.md §4.4): the Syn2Real-TDoc protocol (pixel TP/FP/FN summed over the
// whole set, image-level P/R/F1 at 0.5, plus IoU and ROC AUC) and the ForensicHub Doc protocol (per-image
// pixel F1 at 0.5 averaged over images with at least one tampered pixel). Pure counting; no model.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace diffnet {

// Added to every denominator, as in TDoc eval.py and IMDLBenCo F1.py: an empty class gives 0, not NaN.
constexpr double kMetricEps = 1e-8;

// Probability maps are compared as 8-bit maps u = round(255 p) (what the .prob.png files hold).
// A pixel is predicted tampered iff u > 127, i.e. u >= 128 — TDoc's sweep rule u >= floor(255 t) + 1 at
// t = 0.5; for float p this is p >= 0.5 (it differs from "p > 0.5" only at p == 0.5 exactly).
constexpr int kPixelPositiveAbove = 127;

// Image-level decision: an image is predicted tampered iff its score (a probability) is > this (the
// default; `eval` uses the predictor's page decision threshold).
constexpr double kImageThreshold = 0.5;

// Pixel confusion counts (tampered = positive).
struct PixelCounts {
  int64_t tp = 0, fp = 0, fn = 0, tn = 0;
  PixelCounts& operator+=(const PixelCounts& o);
};

// Counts over one image. pred_u8: uint8 (H, W) probability map; gt: uint8/bool (H, W), any non-zero value
// = tampered. Throws Error("<subject>", "size mismatch ...") when the shapes differ.
PixelCounts count_pixels(const at::Tensor& pred_u8, const at::Tensor& gt, const std::string& subject = "prediction");

// Syn2Real (global) ratios of counts: P = TP/(TP+FP+eps), R = TP/(TP+FN+eps), F1 = 2TP/(2TP+FP+FN+eps),
// IoU = TP/(TP+FP+FN+eps). With no positive at all (TP = FP = FN = 0) every value is 0.
struct PRF {
  double precision = 0, recall = 0, f1 = 0, iou = 0;
};
PRF prf(const PixelCounts& c);

// ForensicHub/IMDLBenCo per-image F1: P and R as above, F1 = 2PR/(P+R+eps).
double forensichub_f1(const PixelCounts& c);

// Area under the ROC curve of `scores` for binary `labels` (non-zero = positive): the Mann–Whitney
// statistic with tied scores given their mid-rank, which equals the trapezoid-rule ROC area.
// nullopt when there is no positive or no negative (undefined).
std::optional<double> roc_auc(const std::vector<double>& scores, const std::vector<int>& labels);

// Everything one evaluation reports. Optional values are undefined ones (JSON null).
struct EvalMetrics {
  int64_t num_images = 0;
  int64_t num_tampered = 0;  // images with at least one tampered GT pixel
  PixelCounts pixel;         // summed over all images (pristine images add FP/TN only)
  PRF pixel_prf;
  double image_threshold = kImageThreshold;
  PixelCounts image;         // image-level counts, tampered = positive, predicted iff score > image_threshold
  PRF image_prf;             // iou unused at image level
  std::optional<double> image_auc;  // null when only one class is present
  std::optional<double> doc_f1;     // mean per-image F1 over tampered images; null when there are none
  int64_t pristine_pixels = 0;      // pixels of images without a tampered GT pixel
  int64_t pristine_flagged = 0;     // ... of which predicted tampered (their FP)
  double pristine_flagged_share() const { return pristine_pixels ? double(pristine_flagged) / double(pristine_pixels) : 0; }
  std::vector<double> scores;       // image scores in the order added (for reliability figures)
  std::vector<int> labels;          // 1 = tampered
};

// Accumulates images one at a time (constant memory apart from one score per image).
class MetricsAccumulator {
 public:
  explicit MetricsAccumulator(double image_threshold = kImageThreshold) : image_threshold_(image_threshold) {}
  // pred_u8 / gt as in count_pixels; image_score: the probability that the image is tampered.
  void add(const at::Tensor& pred_u8, const at::Tensor& gt, double image_score,
           const std::string& subject = "prediction");
  EvalMetrics result() const;

 private:
  double image_threshold_;
  PixelCounts pixel_;
  int64_t pristine_pixels_ = 0, pristine_flagged_ = 0;
  double doc_f1_sum_ = 0;
  int64_t num_tampered_ = 0;
  std::vector<double> scores_;
  std::vector<int> labels_;
};

// JSON with the documented field names: pixel_precision, pixel_recall, pixel_f1, pixel_iou,
// image_precision, image_recall, image_f1, image_auc, doc_f1, num_images, num_tampered, and the counts
// (pixel_tp/fp/fn/tn, image_tp/fp/fn/tn at image_threshold), pristine_flagged_share (share of the pixels of images without a
// tampered pixel that are predicted tampered) and calibration: {brier, ece, log_loss, bins} of the image
// scores (10 equal-width bins). Undefined values are null. `protocol` is echoed as "protocol".
nlohmann::json metrics_to_json(const EvalMetrics& m, const std::string& protocol);

// A few human-readable lines: the protocol's headline metric first, then the rest.
std::string format_metrics(const EvalMetrics& m, const std::string& protocol);

// Throws Error unless protocol is "syn2real" or "doc".
void check_protocol(const std::string& protocol);

}  // namespace diffnet
