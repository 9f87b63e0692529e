// Fitting the page-score calibration (docs/eval.md, "Page score and calibration"): weighted logistic
// regression of page labels on one feature, by Newton's method (IRLS) in double precision, independent
// of torch; and reliability figures (Brier score, expected calibration error, binned reliability).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace diffnet {

struct LogisticFit {
  double a = 0, b = 0;     // p = sigmoid(a x + b)
  double log_loss = 0;     // weighted mean negative log-likelihood at (a, b) (without the penalty)
  int iterations = 0;
  bool converged = false;
};

// Minimises  sum_i w_i * -[y_i log p_i + (1 - y_i) log(1 - p_i)] / sum_i w_i  +  l2 / 2 * a^2
// over (a, b), p_i = sigmoid(a x_i + b), by damped Newton steps (step halving while the objective does not
// decrease). The small ridge on a keeps the fit finite on separable data; l2 = 0 gives the plain maximum
// likelihood fit. Weights empty = all 1. Throws Error on empty input, size mismatch or negative weights.
LogisticFit fit_logistic(const std::vector<double>& x, const std::vector<int>& y, const std::vector<double>& w = {},
                         double l2 = 1e-4);

// Weights that give both classes the same total weight (a 50/50 prior): n / (2 n_class) per item.
std::vector<double> balanced_weights(const std::vector<int>& y);

// The page decision's operating point: the smallest score t taken from `untouched` (scores of untouched
// validation pages) such that at most floor(false_alarm * n) of them are > t, i.e. the (k+1)-th highest
// score with k = floor(false_alarm * n). Throws Error when `untouched` is empty or false_alarm is not in [0, 1).
double false_alarm_threshold(std::vector<double> untouched, double false_alarm);

// Reliability of probabilities `p` for labels `y`: equal-width bins over [0, 1].
struct ReliabilityBin {
  double lo = 0, hi = 0;
  int64_t count = 0;
  double mean_p = 0;        // mean predicted probability in the bin (0 when empty)
  double frequency = 0;     // observed share of positives in the bin (0 when empty)
};
struct Reliability {
  std::vector<ReliabilityBin> bins;
  double brier = 0;         // mean (p - y)^2
  double ece = 0;           // sum_bins count/n * |frequency - mean_p|
  double log_loss = 0;      // mean negative log-likelihood (p clamped to [1e-12, 1 - 1e-12])
};
Reliability reliability(const std::vector<double>& p, const std::vector<int>& y, int num_bins = 10);
nlohmann::json reliability_to_json(const Reliability& r);

// A reliability diagram as an RGB uint8 image (drawn with the overlay's bitmap font): predicted
// probability (bin mean) against observed frequency, the diagonal, bar heights = counts. `title` is
// printed at the top (characters the font lacks are skipped).
// Returns (H, W, 3) bytes in row-major order with H = W = size.
std::vector<uint8_t> draw_reliability_diagram(const Reliability& r, const std::string& title, int size = 480);

}  // namespace diffnet
