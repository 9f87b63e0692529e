// TrainConfig <-> JSON, validation, and the precedence of a run's configuration sources.
#include <cmath>

#include "common/json_fields.h"
#include "diffnet/common.h"
#include "diffnet/model.h"
#include "diffnet/train.h"

namespace diffnet {
namespace {

constexpr const char* kSubject = "train config";

template <class C, class F>
void visit_fields(C& c, F&& f) {
  f("data", c.data);
  f("size", c.size);
  f("batch", c.batch);
  f("accum", c.accum);
  f("steps", c.steps);
  f("lr", c.lr);
  f("warmup", c.warmup);
  f("min_lr", c.min_lr);
  f("weight_decay", c.weight_decay);
  f("line_lr_scale", c.line_lr_scale);
  f("beta1", c.beta1);
  f("beta2", c.beta2);
  f("eps", c.eps);
  f("pos_weight", c.pos_weight);
  f("cls_weight", c.cls_weight);
  f("fa_weight", c.fa_weight);
  f("peak_weight", c.peak_weight);
  f("topk_frac", c.topk_frac);
  f("focal_gamma", c.focal_gamma);
  f("seed", c.seed);
  f("workers", c.workers);
  f("prefetch", c.prefetch);
  f("worker_nice", c.worker_nice);
  f("checkpoint_every", c.checkpoint_every);
  f("keep_checkpoints", c.keep_checkpoints);
  f("max_bad_steps", c.max_bad_steps);
  f("validate", c.validate);
  f("init", c.init);
  f("init_backbone", c.init_backbone);
  f("amp", c.amp);
}

}  // namespace

nlohmann::json to_json(const TrainConfig& cfg) {
  nlohmann::json j = fields_to_json(cfg, [](const auto& c, auto&& f) { visit_fields(c, f); });
  j["augment"] = to_json(cfg.augment);
  return j;
}

TrainConfig train_config_from_json(const nlohmann::json& j, const TrainConfig& base) {
  TrainConfig cfg = base;
  read_fields(j, cfg, [](auto& c, auto&& f) { visit_fields(c, f); }, kSubject, {"augment"});
  if (j.contains("augment")) {
    // Start from the base's augmentation so a partial object only changes what it names.
    if (!j.at("augment").is_object()) throw Error(kSubject, "field 'augment' must be an object");
    nlohmann::json merged = to_json(base.augment);
    for (auto a = j.at("augment").begin(); a != j.at("augment").end(); ++a) merged[a.key()] = a.value();
    cfg.augment = augment_config_from_json(merged);
  }
  return cfg;
}

void validate_train_config(const TrainConfig& c) {
  auto bad = [](const std::string& field, const std::string& why) { throw Error(kSubject, field + " " + why); };
  if (c.size <= 0 || c.size % 32 != 0) bad("size", "must be a positive multiple of 32, got " + std::to_string(c.size));
  if (c.batch <= 0) bad("batch", "must be positive");
  if (c.accum <= 0) bad("accum", "must be positive");
  if (c.steps <= 0) bad("steps", "must be positive");
  if (c.warmup < 0) bad("warmup", "must be >= 0");
  if (!(c.lr > 0) || !std::isfinite(c.lr)) bad("lr", "must be a positive number");
  if (!(c.min_lr >= 0) || c.min_lr > c.lr) bad("min_lr", "must be in [0, lr]");
  if (!(c.weight_decay >= 0)) bad("weight_decay", "must be >= 0");
  if (!(c.beta1 >= 0 && c.beta1 < 1) || !(c.beta2 >= 0 && c.beta2 < 1)) bad("beta1/beta2", "must be in [0, 1)");
  if (!(c.eps > 0)) bad("eps", "must be positive");
  if (!(c.line_lr_scale > 0) || !std::isfinite(c.line_lr_scale)) bad("line_lr_scale", "must be positive");
  if (!(c.pos_weight > 0)) bad("pos_weight", "must be positive");
  if (!(c.cls_weight >= 0)) bad("cls_weight", "must be >= 0");
  if (!(c.fa_weight >= 0) || !std::isfinite(c.fa_weight)) bad("fa_weight", "must be >= 0");
  if (!(c.peak_weight >= 0) || !std::isfinite(c.peak_weight)) bad("peak_weight", "must be >= 0");
  if (!(c.topk_frac > 0 && c.topk_frac <= 1)) bad("topk_frac", "must be in (0, 1]");
  if (!(c.focal_gamma >= 0)) bad("focal_gamma", "must be >= 0");
  if (c.workers < 0) bad("workers", "must be >= 0");
  if (c.prefetch < 0) bad("prefetch", "must be >= 0");
  if (c.worker_nice < 0 || c.worker_nice > 19) bad("worker_nice", "must be in 0..19");
  if (c.checkpoint_every <= 0) bad("checkpoint_every", "must be positive");
  if (c.keep_checkpoints < 0) bad("keep_checkpoints", "must be >= 0");
  if (c.max_bad_steps <= 0) bad("max_bad_steps", "must be positive");
  if (c.data.empty()) bad("data", "needs at least one dataset (--data)");
  if (!(c.augment.prob_disable >= 0 && c.augment.prob_disable <= 1)) bad("augment.prob_disable", "must be in [0, 1]");
}

ResolvedTrainConfig resolve_train_config(const TrainConfigSources& src) {
  const nlohmann::json& file = src.file;
  if (!file.is_object()) throw Error(src.file_name, "expected a JSON object");
  for (auto it = file.begin(); it != file.end(); ++it)
    if (it.key() != "preset" && it.key() != "model" && it.key() != "ablations" && it.key() != "train")
      throw Error(src.file_name, "unknown top-level field '" + it.key() + "' (preset, model, ablations, train)");
  ResolvedTrainConfig r;
  // Training: defaults < the file's "train" < given.
  if (file.contains("train")) r.train = train_config_from_json(file.at("train"));
  r.train = train_config_from_json(src.train, r.train);
  // Model.
  std::string preset = src.preset;
  if (preset.empty() && file.contains("preset")) {
    if (!file.at("preset").is_string()) throw Error(src.file_name, "field 'preset' must be a string");
    preset = file.at("preset").get<std::string>();
  }
  if (preset.empty() && !r.train.init.empty())
    r.model = load_model_config(r.train.init);
  else
    r.model = model_preset(preset.empty() ? "atto" : preset);
  if (file.contains("model")) {
    if (!file.at("model").is_object()) throw Error(src.file_name, "field 'model' must be an object");
    nlohmann::json merged = to_json(r.model);
    for (auto it = file.at("model").begin(); it != file.at("model").end(); ++it) merged[it.key()] = it.value();
    r.model = model_config_from_json(merged);
  }
  if (file.contains("ablations")) {
    if (!file.at("ablations").is_array()) throw Error(src.file_name, "field 'ablations' must be a list");
    for (const auto& id : file.at("ablations")) {
      if (!id.is_string()) throw Error(src.file_name, "ablations must be strings like \"A7\"");
      apply_ablation(r.model, id.get<std::string>());
    }
  }
  for (const auto& id : src.ablations) apply_ablation(r.model, id);
  if (!src.disc_impl.empty()) r.model.disc_impl = src.disc_impl;
  if (src.drop_path_rate >= 0) r.model.drop_path_rate = src.drop_path_rate;
  return r;
}

}  // namespace diffnet
