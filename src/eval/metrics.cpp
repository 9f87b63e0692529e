#include "diffnet/metrics.h"

#include "diffnet/calibration.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "diffnet/common.h"

namespace diffnet {

PixelCounts& PixelCounts::operator+=(const PixelCounts& o) {
  tp += o.tp;
  fp += o.fp;
  fn += o.fn;
  tn += o.tn;
  return *this;
}

PixelCounts count_pixels(const at::Tensor& pred_u8, const at::Tensor& gt, const std::string& subject) {
  if (pred_u8.dim() != 2 || gt.dim() != 2 || pred_u8.sizes() != gt.sizes()) {
    std::ostringstream msg;
    msg << "size mismatch: prediction " << pred_u8.sizes() << " vs ground truth " << gt.sizes();
    throw Error(subject, msg.str());
  }
  if (pred_u8.scalar_type() != at::kByte) throw Error(subject, "prediction map must be 8-bit");
  at::Tensor p = pred_u8.gt(kPixelPositiveAbove);
  at::Tensor g = gt.ne(0);
  PixelCounts c;
  int64_t n = p.numel();
  c.tp = p.logical_and(g).sum().item<int64_t>();
  int64_t pred_pos = p.sum().item<int64_t>();
  int64_t gt_pos = g.sum().item<int64_t>();
  c.fp = pred_pos - c.tp;
  c.fn = gt_pos - c.tp;
  c.tn = n - c.tp - c.fp - c.fn;
  return c;
}

PRF prf(const PixelCounts& c) {
  PRF r;
  double tp = double(c.tp), fp = double(c.fp), fn = double(c.fn);
  r.precision = tp / (tp + fp + kMetricEps);
  r.recall = tp / (tp + fn + kMetricEps);
  r.f1 = 2 * tp / (2 * tp + fp + fn + kMetricEps);
  r.iou = tp / (tp + fp + fn + kMetricEps);
  return r;
}

double forensichub_f1(const PixelCounts& c) {
  double tp = double(c.tp), fp = double(c.fp), fn = double(c.fn);
  double p = tp / (tp + fp + kMetricEps);
  double r = tp / (tp + fn + kMetricEps);
  return 2 * p * r / (p + r + kMetricEps);
}

std::optional<double> roc_auc(const std::vector<double>& scores, const std::vector<int>& labels) {
  if (scores.size() != labels.size()) throw Error("roc_auc", "scores and labels differ in length");
  const size_t n = scores.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Sum of the (1-based, mid-ranked) ranks of the positives.
  double pos_rank_sum = 0;
  int64_t n_pos = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    double mid_rank = (double(i + 1) + double(j)) / 2.0;  // ranks i+1 .. j share their mean
    for (size_t k = i; k < j; ++k)
      if (labels[order[k]] != 0) {
        pos_rank_sum += mid_rank;
        ++n_pos;
      }
    i = j;
  }
  int64_t n_neg = int64_t(n) - n_pos;
  if (n_pos == 0 || n_neg == 0) return std::nullopt;
  double u = pos_rank_sum - double(n_pos) * double(n_pos + 1) / 2.0;
  return u / (double(n_pos) * double(n_neg));
}

void MetricsAccumulator::add(const at::Tensor& pred_u8, const at::Tensor& gt, double image_score,
                             const std::string& subject) {
  PixelCounts c = count_pixels(pred_u8, gt, subject);
  pixel_ += c;
  bool tampered = (c.tp + c.fn) > 0;
  if (tampered) {
    doc_f1_sum_ += forensichub_f1(c);
    ++num_tampered_;
  } else {
    pristine_pixels_ += c.fp + c.tn;
    pristine_flagged_ += c.fp;
  }
  scores_.push_back(image_score);
  labels_.push_back(tampered ? 1 : 0);
}

EvalMetrics MetricsAccumulator::result() const {
  EvalMetrics m;
  m.num_images = int64_t(scores_.size());
  m.num_tampered = num_tampered_;
  m.pixel = pixel_;
  m.pixel_prf = prf(pixel_);
  m.image_threshold = image_threshold_;
  for (size_t i = 0; i < scores_.size(); ++i) {
    bool pred = scores_[i] > image_threshold_;
    bool label = labels_[i] != 0;
    if (pred && label) ++m.image.tp;
    else if (pred) ++m.image.fp;
    else if (label) ++m.image.fn;
    else ++m.image.tn;
  }
  m.image_prf = prf(m.image);
  m.image_auc = roc_auc(scores_, labels_);
  if (num_tampered_ > 0) m.doc_f1 = doc_f1_sum_ / double(num_tampered_);
  m.pristine_pixels = pristine_pixels_;
  m.pristine_flagged = pristine_flagged_;
  m.scores = scores_;
  m.labels = labels_;
  return m;
}

namespace {
nlohmann::json opt_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }
std::string opt_str(const std::optional<double>& v) {
  if (!v) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", *v);
  return buf;
}
}  // namespace

nlohmann::json metrics_to_json(const EvalMetrics& m, const std::string& protocol) {
  nlohmann::json j;
  j["protocol"] = protocol;
  j["num_images"] = m.num_images;
  j["num_tampered"] = m.num_tampered;
  j["pixel_precision"] = m.pixel_prf.precision;
  j["pixel_recall"] = m.pixel_prf.recall;
  j["pixel_f1"] = m.pixel_prf.f1;
  j["pixel_iou"] = m.pixel_prf.iou;
  j["image_precision"] = m.image_prf.precision;
  j["image_recall"] = m.image_prf.recall;
  j["image_f1"] = m.image_prf.f1;
  j["image_auc"] = opt_json(m.image_auc);
  j["doc_f1"] = opt_json(m.doc_f1);
  j["pixel_tp"] = m.pixel.tp;
  j["pixel_fp"] = m.pixel.fp;
  j["pixel_fn"] = m.pixel.fn;
  j["pixel_tn"] = m.pixel.tn;
  j["image_tp"] = m.image.tp;
  j["image_fp"] = m.image.fp;
  j["image_fn"] = m.image.fn;
  j["image_tn"] = m.image.tn;
  j["image_threshold"] = m.image_threshold;
  j["pristine_flagged_share"] = m.pristine_flagged_share();
  j["pristine_pixels"] = m.pristine_pixels;
  j["calibration"] = reliability_to_json(reliability(m.scores, m.labels));
  return j;
}

std::string format_metrics(const EvalMetrics& m, const std::string& protocol) {
  char buf[1024];
  std::string out;
  if (protocol == "doc") {
    std::snprintf(buf, sizeof buf, "doc protocol: mean per-image F1 %s over %lld tampered of %lld images\n",
                  opt_str(m.doc_f1).c_str(), (long long)m.num_tampered, (long long)m.num_images);
  } else {
    std::snprintf(buf, sizeof buf, "syn2real protocol: pixel F1 %.4f, image F1 %.4f (%lld images, %lld tampered)\n",
                  m.pixel_prf.f1, m.image_prf.f1, (long long)m.num_images, (long long)m.num_tampered);
  }
  out += buf;
  std::snprintf(buf, sizeof buf,
                "pixel  P %.4f  R %.4f  F1 %.4f  IoU %.4f  (TP %lld FP %lld FN %lld)\n"
                "image  P %.4f  R %.4f  F1 %.4f  AUC %s  (TP %lld FP %lld FN %lld TN %lld)\n"
                "doc F1 %s\n"
                "pristine images: %lld of %lld flagged (score > %.4g), %.4f %% of their pixels flagged\n",
                m.pixel_prf.precision, m.pixel_prf.recall, m.pixel_prf.f1, m.pixel_prf.iou, (long long)m.pixel.tp,
                (long long)m.pixel.fp, (long long)m.pixel.fn, m.image_prf.precision, m.image_prf.recall,
                m.image_prf.f1, opt_str(m.image_auc).c_str(), (long long)m.image.tp, (long long)m.image.fp,
                (long long)m.image.fn, (long long)m.image.tn, opt_str(m.doc_f1).c_str(), (long long)m.image.fp,
                (long long)(m.image.fp + m.image.tn), m.image_threshold, 100.0 * m.pristine_flagged_share());
  out += buf;
  return out;
}

void check_protocol(const std::string& protocol) {
  if (protocol != "syn2real" && protocol != "doc")
    throw Error("protocol", "unknown protocol '" + protocol + "' (expected syn2real or doc)");
}

}  // namespace diffnet
