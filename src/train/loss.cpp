// Focal loss (docs/design.md §4.1) and the learning-rate schedule.
#include <algorithm>
#include <cmath>

#include "diffnet/common.h"
#include "diffnet/train.h"

namespace diffnet {

at::Tensor focal_loss(const at::Tensor& logits, const at::Tensor& target, double gamma,
                      const std::vector<double>& class_weights, double norm) {
  if (logits.dim() < 2 || static_cast<size_t>(logits.size(1)) != class_weights.size())
    throw Error("focal_loss", "logits must be (N, C, ...) with one weight per class");
  at::Tensor logp_all = at::log_softmax(logits.to(at::kFloat), 1);
  at::Tensor t = target.to(at::kLong).unsqueeze(1);
  at::Tensor logp = logp_all.gather(1, t).squeeze(1);
  at::Tensor p = logp.exp();
  // Per-pixel class weight from scalars (no host-to-device copy of the weight table).
  at::Tensor cls = t.squeeze(1);
  at::Tensor w = at::full_like(logp, class_weights[0]);
  for (size_t c = 1; c < class_weights.size(); ++c)
    w = at::where(cls == static_cast<int64_t>(c), at::full_like(logp, class_weights[c]), w);
  at::Tensor focal = gamma == 0.0 ? -logp : -(1.0 - p).pow(gamma) * logp;
  if (norm > 0) return (w * focal).sum() / norm;
  return (w * focal).sum() / w.sum();
}

double seg_weight_sum(const at::Tensor& mask, double pos_weight) {
  const double tampered = static_cast<double>(mask.ne(0).sum().item<int64_t>());
  return static_cast<double>(mask.numel()) + (pos_weight - 1.0) * tampered;
}

namespace {

// What both top-k terms start from: the tampered margin l1 - l0 as (B, H*W) float and k for frac.
struct TopK {
  at::Tensor margin;
  int64_t k;
};
TopK topk_margin(const at::Tensor& seg_logits, const at::Tensor& mask, double frac, const char* who) {
  if (seg_logits.dim() != 4 || seg_logits.size(1) != 2 || mask.dim() != 3 || mask.size(0) != seg_logits.size(0))
    throw Error(who, "expected logits (B, 2, H, W) and a mask (B, H, W)");
  at::Tensor margin = (seg_logits.select(1, 1) - seg_logits.select(1, 0)).to(at::kFloat).flatten(1);
  const int64_t n = margin.size(1);
  return {margin, std::clamp<int64_t>(std::llround(frac * static_cast<double>(n)), 1, n)};
}

}  // namespace

at::Tensor false_alarm_loss(const at::Tensor& seg_logits, const at::Tensor& mask, double frac) {
  const TopK t = topk_margin(seg_logits, mask, frac, "false_alarm_loss");
  at::Tensor idx = mask.flatten(1).ne(0).any(1).logical_not().nonzero().flatten();  // untouched crops
  if (idx.numel() == 0) return t.margin.sum() * 0.0;  // keeps the graph (and the device)
  at::Tensor top = std::get<0>(t.margin.index_select(0, idx).topk(t.k, 1));
  return at::softplus(top).mean(1).sum() / static_cast<double>(seg_logits.size(0));
}

at::Tensor peak_loss(const at::Tensor& seg_logits, const at::Tensor& mask, double frac) {
  const TopK t = topk_margin(seg_logits, mask, frac, "peak_loss");
  at::Tensor edited = mask.flatten(1).ne(0);
  at::Tensor counts = edited.sum(1).cpu();
  at::Tensor total = t.margin.sum() * 0.0;  // keeps the graph (and the device) when no crop has an edit
  for (int64_t i = 0; i < seg_logits.size(0); ++i) {
    const int64_t n = counts[i].item<int64_t>();
    if (n == 0) continue;
    at::Tensor top = std::get<0>(t.margin[i].masked_select(edited[i]).topk(std::min(t.k, n)));
    total = total + at::softplus(-top).mean();
  }
  return total / static_cast<double>(seg_logits.size(0));
}

LossParts diffnet_loss(const DiffNetOutput& out, const at::Tensor& mask, const TrainConfig& cfg, double seg_norm) {
  at::Tensor target = mask.to(at::kLong);
  LossParts l;
  l.seg = focal_loss(out.seg_logits, target, cfg.focal_gamma, {1.0, cfg.pos_weight}, seg_norm);
  at::Tensor label = target.flatten(1).amax(1);
  l.cls = focal_loss(out.cls_logits, label, cfg.focal_gamma, {1.0, 1.0});
  l.total = l.seg + cfg.cls_weight * l.cls;
  // A top-k term: computed and added only when its weight is positive, else a zero for the log.
  auto topk_term = [&](double weight, at::Tensor (*term)(const at::Tensor&, const at::Tensor&, double)) {
    if (!(weight > 0)) return at::zeros({}, l.seg.options());
    at::Tensor v = term(out.seg_logits, mask, cfg.topk_frac);
    l.total = l.total + weight * v;
    return v;
  };
  l.fa = topk_term(cfg.fa_weight, false_alarm_loss);
  l.peak = topk_term(cfg.peak_weight, peak_loss);
  return l;
}

double lr_at(const TrainConfig& cfg, int64_t step) {
  if (step < cfg.warmup) return cfg.lr * static_cast<double>(step + 1) / static_cast<double>(cfg.warmup);
  int64_t span = std::max<int64_t>(cfg.steps - cfg.warmup, 1);
  double t = std::min(1.0, static_cast<double>(step - cfg.warmup) / static_cast<double>(span));
  return cfg.min_lr + (cfg.lr - cfg.min_lr) * 0.5 * (1.0 + std::cos(M_PI * t));
}

}  // namespace diffnet
