// Whole-page pieces that need no model: raised-cosine window blending, the page content mask, page
// statistics, the page-score calibration (apply and fit) and reliability figures.
#include <ATen/ATen.h>

#include <array>
#include <cstdio>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "diffnet/calibration.h"
#include "diffnet/common.h"
#include "diffnet/predict.h"
#include "eval/font.h"

namespace diffnet {

// ---- Blending ----------------------------------------------------------------------------------------

int64_t default_stride(int64_t window, const std::string& merge) {
  if (merge == "max") return window;
  return std::max<int64_t>(8, window / 2 / 8 * 8);
}

std::vector<float> blend_profile(int64_t window, int64_t origin, int64_t extent) {
  if (window <= 0) throw Error("blend_profile", "window must be positive");
  std::vector<float> w(static_cast<size_t>(window), 0.0f);
  const bool at_start = origin == 0, at_end = origin + window == extent;
  const double pi = std::acos(-1.0);
  for (int64_t t = 0; t < window; ++t) {
    const bool first_half = 2 * t + 1 < window;  // centre of pixel t before the window's centre
    double v = std::sin(pi * (double(t) + 0.5) / double(window));
    v *= v;
    if ((first_half && at_start) || (!first_half && at_end)) v = 1.0;
    w[size_t(t)] = std::max(kBlendFloor, float(v));
  }
  return w;
}

at::Tensor window_weight(int64_t h, int64_t w, const WindowPos& pos, int64_t canvas_h, int64_t canvas_w) {
  std::vector<float> wy = blend_profile(h, pos.y, canvas_h), wx = blend_profile(w, pos.x, canvas_w);
  at::Tensor ty = at::from_blob(wy.data(), {h, 1}, at::kFloat).clone();
  at::Tensor tx = at::from_blob(wx.data(), {1, w}, at::kFloat).clone();
  return ty * tx;
}

BlendMerger::BlendMerger(int64_t canvas_h, int64_t canvas_w)
    : num_(at::zeros({canvas_h, canvas_w}, at::kFloat)), den_(at::zeros({canvas_h, canvas_w}, at::kFloat)) {}

void BlendMerger::add(const at::Tensor& window_prob, const WindowPos& pos) {
  const int64_t h = window_prob.size(0), w = window_prob.size(1);
  if (pos.y < 0 || pos.x < 0 || pos.y + h > num_.size(0) || pos.x + w > num_.size(1))
    throw Error("BlendMerger", "window outside the canvas");
  const at::Tensor weight = window_weight(h, w, pos, num_.size(0), num_.size(1));
  num_.slice(0, pos.y, pos.y + h).slice(1, pos.x, pos.x + w).add_(weight * window_prob.to(at::kFloat));
  den_.slice(0, pos.y, pos.y + h).slice(1, pos.x, pos.x + w).add_(weight);
}

at::Tensor BlendMerger::current() const { return num_ / den_.clamp_min(1e-30f); }

at::Tensor BlendMerger::take() {
  // In place (a page-sized map is large): num / den, and 0 where no window reached (den = 0, num = 0).
  at::Tensor out = std::move(num_);
  out.div_(den_.clamp_min_(1e-30f));
  den_ = at::Tensor();
  return out;
}

// ---- Content and page statistics -----------------------------------------------------------------------

at::Tensor content_blocks(const at::Tensor& rgb) {
  if (rgb.dim() != 3 || rgb.size(2) != 3 || rgb.size(0) % 8 != 0 || rgb.size(1) % 8 != 0)
    throw Error("content_blocks", "expected an RGB (H, W, 3) image with H and W multiples of 8");
  const int64_t Hb = rgb.size(0) / 8, Wb = rgb.size(1) / 8;
  // Luma range per block, a band of block rows at a time: a float copy of a whole page would be 12 bytes
  // a pixel.
  constexpr int64_t kBand = 32;
  at::Tensor range = at::empty({Hb, Wb}, at::kFloat);
  for (int64_t b0 = 0; b0 < Hb; b0 += kBand) {
    const int64_t b1 = std::min(Hb, b0 + kBand);
    at::Tensor c = rgb.slice(0, b0 * 8, b1 * 8).to(at::kFloat);
    at::Tensor luma = c.select(2, 0) * 0.299f + c.select(2, 1) * 0.587f + c.select(2, 2) * 0.114f;
    at::Tensor blocks = luma.view({b1 - b0, 8, Wb, 8});
    range.slice(0, b0, b1).copy_(blocks.amax({1, 3}) - blocks.amin({1, 3}));
  }
  at::Tensor ink = range >= float(kContentRange);
  const int64_t k = 2 * kContentDilate + 1;
  at::Tensor near = at::max_pool2d(ink.to(at::kFloat).view({1, 1, Hb, Wb}), {k, k}, {1, 1},
                                   {kContentDilate, kContentDilate})
                        .view({Hb, Wb}) > 0.5f;
  // Blocks of exactly one colour (synthetic white margins, padding) never count, even next to text.
  return ink | (near & (range > 0));
}

MaskedQuantiles masked_quantiles(const at::Tensor& prob, const at::Tensor& mask, const std::vector<double>& qs,
                                 int64_t cell) {
  if (prob.dim() != 2 || mask.dim() != 2 || cell < 1)
    throw Error("masked_quantile", "expected a 2-D map, a 2-D mask and a cell size >= 1");
  const int64_t H = prob.size(0), W = prob.size(1);
  if (mask.size(0) * cell < H || mask.size(1) * cell < W)
    throw Error("masked_quantile", "the mask does not cover the map");
  // One pass over the map into a histogram (no copy of the selected values: a page map is large).
  constexpr int64_t kBins = 4096;
  at::Tensor p = prob.to(at::kFloat).contiguous();
  at::Tensor m = mask.to(at::kBool).contiguous();
  const float* pp = p.data_ptr<float>();
  const bool* mp = m.data_ptr<bool>();
  const int64_t mw = m.size(1);
  std::vector<int64_t> hist(size_t(kBins), 0);
  MaskedQuantiles r;
  for (int64_t y = 0; y < H; ++y) {
    const bool* mrow = mp + (y / cell) * mw;
    const float* prow = pp + y * W;
    for (int64_t x = 0; x < W; ++x) {
      if (!mrow[x / cell]) continue;
      const float v = std::clamp(prow[x], 0.0f, 1.0f);
      hist[size_t(std::min<int64_t>(kBins - 1, int64_t(v * float(kBins))))]++;
      ++r.count;
    }
  }
  for (double q : qs) {
    if (r.count == 0) {
      r.values.push_back(0);
      continue;
    }
    const double target = std::clamp(q, 0.0, 1.0) * double(r.count);
    int64_t bin = 0, cum = hist[0];
    while (bin < kBins - 1 && double(cum) < target) cum += hist[size_t(++bin)];
    r.values.push_back(double(bin + 1) / double(kBins));
  }
  return r;
}

double masked_quantile(const at::Tensor& prob, const at::Tensor& mask, double q, int64_t cell) {
  return masked_quantiles(prob, mask, {q}, cell).values[0];
}

const std::vector<std::string>& page_stat_names() {
  static const std::vector<std::string> names = {"q99", "q999", "cls_max", "cls_mean"};
  return names;
}

const std::vector<std::string>& size_invariant_page_stat_names() {
  static const std::vector<std::string> names = {"q99", "q999", "cls_mean"};
  return names;
}

double page_stat(const PageStats& s, const std::string& name) {
  if (name == "q99") return s.q99;
  if (name == "q999") return s.q999;
  if (name == "cls_max") return s.cls_max;
  if (name == "cls_mean") return s.cls_mean;
  throw Error("page statistic", "unknown statistic '" + name + "' (expected q99, q999, cls_max or cls_mean)");
}

nlohmann::json page_stats_to_json(const PageStats& s) {
  return {{"content_fraction", s.content_fraction}, {"q99", s.q99},           {"q999", s.q999},
          {"cls_max", s.cls_max},                   {"cls_mean", s.cls_mean}, {"content_windows", s.content_windows}};
}

// ---- Calibration ---------------------------------------------------------------------------------------

namespace {
double sigmoid(double z) { return z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z)); }
}  // namespace

double PageCalibration::feature(double raw) const {
  if (transform == "identity") return raw;
  const double r = std::clamp(raw, 1e-4, 1.0 - 1e-4);
  return std::log(r / (1.0 - r));
}

double PageCalibration::apply(double raw) const { return sigmoid(a * feature(raw) + b); }

nlohmann::json PageCalibration::to_json() const {
  nlohmann::json j = {{"statistic", statistic}, {"transform", transform}, {"a", a},
                      {"b", b},         {"prior", prior},         {"threshold", threshold}};
  if (!fit.is_null()) j["fit"] = fit;
  return j;
}

PageCalibration PageCalibration::from_json(const nlohmann::json& j, const std::string& subject) {
  PageCalibration c;
  try {
    c.statistic = j.at("statistic").get<std::string>();
    c.transform = j.value("transform", std::string("logit"));
    c.a = j.at("a").get<double>();
    c.b = j.at("b").get<double>();
    c.prior = j.value("prior", 0.5);
    c.threshold = j.value("threshold", 0.5);
    if (j.contains("fit")) c.fit = j.at("fit");
  } catch (const std::exception& e) {
    throw Error(subject, std::string("bad calibration metadata: ") + e.what());
  }
  if (c.transform != "logit" && c.transform != "identity")
    throw Error(subject, "calibration transform '" + c.transform + "' is not logit or identity");
  if (!std::isfinite(c.a) || !std::isfinite(c.b)) throw Error(subject, "calibration a/b are not finite");
  if (!(c.threshold >= 0 && c.threshold < 1)) throw Error(subject, "calibration threshold must be in [0, 1)");
  page_stat(PageStats{}, c.statistic);  // validates the name
  return c;
}

double false_alarm_threshold(std::vector<double> untouched, double false_alarm) {
  if (untouched.empty()) throw Error("false_alarm_threshold", "no untouched pages");
  if (!(false_alarm >= 0 && false_alarm < 1)) throw Error("false_alarm_threshold", "false_alarm must be in [0, 1)");
  // k pages may score above the threshold; the small tolerance keeps e.g. 0.05 * 60 from rounding down to 2.
  const size_t k = std::min(untouched.size() - 1, size_t(std::floor(false_alarm * double(untouched.size()) + 1e-9)));
  std::sort(untouched.begin(), untouched.end(), std::greater<double>());
  return untouched[k];
}

LogisticFit fit_logistic(const std::vector<double>& x, const std::vector<int>& y, const std::vector<double>& w_in,
                         double l2) {
  const size_t n = x.size();
  if (n == 0) throw Error("fit_logistic", "no data");
  if (y.size() != n || (!w_in.empty() && w_in.size() != n)) throw Error("fit_logistic", "size mismatch");
  std::vector<double> w = w_in.empty() ? std::vector<double>(n, 1.0) : w_in;
  double wsum = 0;
  for (double v : w) {
    if (!(v >= 0)) throw Error("fit_logistic", "negative or NaN weight");
    wsum += v;
  }
  if (!(wsum > 0)) throw Error("fit_logistic", "all weights are zero");
  // Objective: weighted mean NLL + l2/2 a^2.
  auto nll = [&](double a, double b) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) {
      const double z = a * x[i] + b;
      // -log sigmoid(z) = softplus(-z); -log(1 - sigmoid(z)) = softplus(z)
      const double sp_pos = z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
      const double sp_neg = sp_pos - z;
      s += w[i] * (y[i] ? sp_neg : sp_pos);
    }
    return s / wsum;
  };
  auto objective = [&](double a, double b) { return nll(a, b) + 0.5 * l2 * a * a; };
  LogisticFit f;
  // Start: a = 0, b = the weighted log-odds of the labels (clamped).
  double pos = 0;
  for (size_t i = 0; i < n; ++i) pos += w[i] * (y[i] ? 1 : 0);
  const double rate = std::clamp(pos / wsum, 1e-6, 1 - 1e-6);
  // Gradient (ga, gb) and Hessian (haa, hab, hbb) of the objective at (a, b).
  struct Derivatives {
    double ga = 0, gb = 0, haa = 0, hab = 0, hbb = 0;
  };
  auto derivatives = [&](double a, double b) {
    Derivatives d;
    for (size_t i = 0; i < n; ++i) {
      const double p = sigmoid(a * x[i] + b), r = w[i] * (p - (y[i] ? 1.0 : 0.0)), v = w[i] * p * (1 - p);
      d.ga += r * x[i], d.gb += r;
      d.haa += v * x[i] * x[i], d.hab += v * x[i], d.hbb += v;
    }
    d.ga = d.ga / wsum + l2 * a, d.gb /= wsum;
    d.haa = d.haa / wsum + l2, d.hab /= wsum, d.hbb /= wsum;
    return d;
  };
  double a = 0, b = std::log(rate / (1 - rate));
  double obj = objective(a, b);
  for (int it = 0; it < 200; ++it) {
    const auto [ga, gb, haa, hab, hbb] = derivatives(a, b);
    const double det = haa * hbb - hab * hab;
    double da, db;
    if (det > 1e-300 && std::isfinite(det)) {
      da = -(hbb * ga - hab * gb) / det;
      db = -(-hab * ga + haa * gb) / det;
    } else {  // degenerate Hessian (e.g. a constant feature): gradient step
      da = -ga, db = -gb;
    }
    double step = 1;
    double na = a + da, nb = b + db, nobj = objective(na, nb);
    while (!(nobj <= obj) && step > 1e-10) {
      step *= 0.5;
      na = a + step * da, nb = b + step * db, nobj = objective(na, nb);
    }
    f.iterations = it + 1;
    if (!(nobj <= obj)) break;  // no descent possible: at the optimum to numerical precision
    const double change = std::abs(na - a) + std::abs(nb - b);
    a = na, b = nb, obj = nobj;
    if (change < 1e-12 || std::sqrt(ga * ga + gb * gb) < 1e-12) {
      f.converged = true;
      break;
    }
  }
  if (!f.converged) {
    // Converged when the gradient is negligible at the final point.
    const Derivatives d = derivatives(a, b);
    f.converged = std::sqrt(d.ga * d.ga + d.gb * d.gb) < 1e-8;
  }
  f.a = a, f.b = b;
  f.log_loss = nll(a, b);
  return f;
}

std::vector<double> balanced_weights(const std::vector<int>& y) {
  int64_t npos = 0;
  for (int v : y) npos += v ? 1 : 0;
  const int64_t n = int64_t(y.size()), nneg = n - npos;
  std::vector<double> w(y.size(), 1.0);
  if (npos == 0 || nneg == 0) return w;
  for (size_t i = 0; i < y.size(); ++i) w[i] = double(n) / (2.0 * double(y[i] ? npos : nneg));
  return w;
}

Reliability reliability(const std::vector<double>& p, const std::vector<int>& y, int num_bins) {
  if (p.size() != y.size()) throw Error("reliability", "size mismatch");
  if (num_bins < 1) throw Error("reliability", "need at least one bin");
  Reliability r;
  r.bins.resize(size_t(num_bins));
  std::vector<double> sum_p(size_t(num_bins), 0), sum_y(size_t(num_bins), 0);
  for (int k = 0; k < num_bins; ++k) r.bins[size_t(k)].lo = double(k) / num_bins, r.bins[size_t(k)].hi = double(k + 1) / num_bins;
  const double n = double(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    const double pi = std::clamp(p[i], 0.0, 1.0);
    const int k = std::min(num_bins - 1, int(pi * num_bins));
    r.bins[size_t(k)].count++;
    sum_p[size_t(k)] += pi, sum_y[size_t(k)] += y[i] ? 1 : 0;
    r.brier += (pi - (y[i] ? 1 : 0)) * (pi - (y[i] ? 1 : 0));
    const double pc = std::clamp(pi, 1e-12, 1 - 1e-12);
    r.log_loss += -(y[i] ? std::log(pc) : std::log(1 - pc));
  }
  for (int k = 0; k < num_bins; ++k) {
    ReliabilityBin& b = r.bins[size_t(k)];
    if (b.count == 0) continue;
    b.mean_p = sum_p[size_t(k)] / double(b.count);
    b.frequency = sum_y[size_t(k)] / double(b.count);
    r.ece += double(b.count) / n * std::abs(b.frequency - b.mean_p);
  }
  if (n > 0) r.brier /= n, r.log_loss /= n;
  return r;
}

nlohmann::json reliability_to_json(const Reliability& r) {
  nlohmann::json bins = nlohmann::json::array();
  for (const ReliabilityBin& b : r.bins)
    bins.push_back({{"lo", b.lo}, {"hi", b.hi}, {"count", b.count}, {"mean_p", b.mean_p}, {"frequency", b.frequency}});
  return {{"brier", r.brier}, {"ece", r.ece}, {"log_loss", r.log_loss}, {"bins", bins}};
}

std::vector<uint8_t> draw_reliability_diagram(const Reliability& r, const std::string& title, int size) {
  const int64_t S = std::max(size, 240);
  std::vector<uint8_t> img(size_t(S * S * 3), 255);
  uint8_t* px = img.data();
  const int scale = S >= 400 ? 2 : 1;
  const int64_t left = 14 * scale * font::kAdvance / 2 + 10, right = S - 16, top = 16 + 10 * scale * 2,
                bottom = S - 12 * scale * 2 - 14;
  const int64_t pw = right - left, ph = bottom - top;
  auto X = [&](double v) { return left + int64_t(std::lround(v * double(pw))); };
  auto Y = [&](double v) { return bottom - int64_t(std::lround(v * double(ph))); };
  const std::array<uint8_t, 3> black{0, 0, 0}, grey{200, 200, 200}, bar{210, 225, 245}, dot{200, 30, 30};
  // Grid at 0.1 steps, axes, count bars (height = share of the items in the bin).
  for (int k = 0; k <= 10; ++k) {
    font::fill_rect(px, S, S, X(k / 10.0), top, X(k / 10.0) + 1, bottom, grey);
    font::fill_rect(px, S, S, left, Y(k / 10.0), right, Y(k / 10.0) + 1, grey);
  }
  int64_t total = 0;
  for (const ReliabilityBin& b : r.bins) total += b.count;
  for (const ReliabilityBin& b : r.bins) {
    if (b.count == 0 || total == 0) continue;
    const double h = double(b.count) / double(total);
    font::fill_rect(px, S, S, X(b.lo) + 2, Y(h), X(b.hi) - 1, bottom, bar);
  }
  // Diagonal (perfect calibration).
  for (int64_t i = 0; i <= pw; ++i) {
    const double v = double(i) / double(pw);
    font::fill_rect(px, S, S, X(v), Y(v), X(v) + 1, Y(v) + 1, black);
  }
  font::fill_rect(px, S, S, left, top, left + 1, bottom + 1, black);
  font::fill_rect(px, S, S, left, bottom, right + 1, bottom + 1, black);
  // Observed frequency at the mean predicted probability of every non-empty bin, joined by lines.
  int64_t px0 = -1, py0 = -1;
  for (const ReliabilityBin& b : r.bins) {
    if (b.count == 0) continue;
    const int64_t cx = X(b.mean_p), cy = Y(b.frequency);
    if (px0 >= 0) {
      const int64_t steps = std::max(std::abs(cx - px0), std::abs(cy - py0));
      for (int64_t s = 0; s <= steps; ++s) {
        const int64_t lx = px0 + (cx - px0) * s / std::max<int64_t>(1, steps), ly = py0 + (cy - py0) * s / std::max<int64_t>(1, steps);
        font::fill_rect(px, S, S, lx - scale / 2, ly - scale / 2, lx + scale / 2 + 1, ly + scale / 2 + 1, dot);
      }
    }
    font::fill_rect(px, S, S, cx - 3 * scale, cy - 3 * scale, cx + 3 * scale + 1, cy + 3 * scale + 1, dot);
    px0 = cx, py0 = cy;
  }
  // Labels.
  for (int k = 0; k <= 10; k += 2) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%.1f", k / 10.0);
    const int64_t tw = font::text_width(buf, scale);
    font::draw_text(px, S, S, X(k / 10.0) - tw / 2, bottom + 4, buf, scale, black);
    font::draw_text(px, S, S, left - tw - 4, Y(k / 10.0) - font::kGlyphH * scale / 2, buf, scale, black);
  }
  const std::string xl = "PREDICTED P (BIN MEAN)";
  font::draw_text(px, S, S, left + (pw - font::text_width(xl, scale)) / 2, bottom + 4 + 10 * scale, xl, scale, black);
  font::draw_text(px, S, S, 4, top - 10 * scale, "OBSERVED", scale, black);
  font::draw_text(px, S, S, left + 4, 6, title, scale, black);
  return img;
}

}  // namespace diffnet
