// Model state and weights files (docs/design.md §7): strict loading in the style of whisper.cpp's loader.
#include <torch/torch.h>

#include "diffnet/common.h"
#include "diffnet/config.h"
#include "diffnet/model.h"
#include "diffnet/safetensors.h"
#include "model/weights_check.h"

namespace diffnet {

namespace {

std::map<std::string, at::Tensor> live_tensors(DiffNet& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& kv : model->named_parameters(/*recurse=*/true)) out[kv.key()] = kv.value();
  for (const auto& kv : model->named_buffers(/*recurse=*/true)) out[kv.key()] = kv.value();
  return out;
}

// Checks made before the model is built: a config whose backbone alone needs more parameters than the
// file holds cannot match it (so absurd dims fail here, not after allocating them), and every floating
// tensor must be finite (NaN weights would give confident nonsense).
void check_weights_file(const ModelConfig& cfg, const std::map<std::string, at::Tensor>& tensors,
                        const std::string& path) {
  int64_t held = 0;
  for (const auto& kv : tensors) held += kv.second.numel();
  // Each ConvNeXt block has two pointwise linears of d x 4d: 8 d^2 weights, a lower bound of the model.
  double needed = 0;
  for (size_t i = 0; i < cfg.dims.size() && i < cfg.depths.size(); ++i)
    needed += 8.0 * double(cfg.depths[i]) * double(cfg.dims[i]) * double(cfg.dims[i]);
  if (needed > double(held))
    throw Error(path, "model config dims " + shape_str(cfg.dims) + " need at least " + std::to_string(int64_t(needed)) +
                          " parameters, the file holds " + std::to_string(held) + ": config and tensors do not match");
  for (const auto& kv : tensors)
    if (at::isFloatingType(kv.second.scalar_type()) && !at::isfinite(kv.second).all().item<bool>())
      throw Error(path, "tensor '" + kv.first + "' has non-finite values (NaN or infinity): the file is damaged");
}

}  // namespace

std::map<std::string, at::Tensor> model_state(DiffNet& model) {
  std::map<std::string, at::Tensor> out;
  for (auto& kv : live_tensors(model)) out[kv.first] = kv.second.detach().to(at::kCPU).contiguous();
  return out;
}

void load_state_strict(const std::map<std::string, at::Tensor>& target, const std::map<std::string, at::Tensor>& src,
                       const std::string& subject) {
  // Check everything first so a bad file leaves the model untouched.
  for (const auto& kv : src) {
    auto it = target.find(kv.first);
    if (it == target.end()) throw Error(subject, "unknown tensor '" + kv.first + "'");
    if (kv.second.sizes() != it->second.sizes())
      throw Error(subject, "tensor '" + kv.first + "' has wrong shape: got " + shape_str(kv.second.sizes().vec()) +
                               ", expected " + shape_str(it->second.sizes().vec()));
  }
  std::vector<std::string> missing;
  for (const auto& kv : target)
    if (!src.count(kv.first)) missing.push_back(kv.first);
  if (!missing.empty())
    throw Error(subject, "missing tensor '" + missing[0] + "'" +
                             (missing.size() > 1 ? " (and " + std::to_string(missing.size() - 1) + " more)" : ""));
  torch::NoGradGuard no_grad;
  for (const auto& kv : src) {
    at::Tensor dst = target.at(kv.first);
    dst.copy_(kv.second.to(dst.device()));  // copy_ converts dtype and keeps dst's memory format
  }
}

void load_model_state(DiffNet& model, const std::map<std::string, at::Tensor>& tensors) {
  load_state_strict(live_tensors(model), tensors, "weights");
}

bool load_model_state_for_init(DiffNet& model, const std::map<std::string, at::Tensor>& tensors) {
  const std::string part = kLineContextPrefix;
  auto has_part = [&](const std::map<std::string, at::Tensor>& m) {
    auto it = m.lower_bound(part);
    return it != m.end() && it->first.compare(0, part.size(), part) == 0;
  };
  const std::map<std::string, at::Tensor> own = live_tensors(model);
  if (!has_part(own) || has_part(tensors)) {
    load_model_state(model, tensors);
    return false;
  }
  std::map<std::string, at::Tensor> w = tensors;
  for (const auto& kv : own)
    if (kv.first.compare(0, part.size(), part) == 0) w[kv.first] = kv.second.detach().clone();
  load_model_state(model, w);
  return true;
}

void save_model(DiffNet& model, const std::string& path, at::ScalarType dtype,
                const std::map<std::string, std::string>& extra_metadata) {
  if (dtype != at::kFloat && dtype != at::kHalf && dtype != at::kBFloat16)
    throw Error(path, "weights can be stored as float32, float16 or bfloat16 only");
  std::map<std::string, at::Tensor> state = model_state(model);
  for (auto& kv : state)
    if (at::isFloatingType(kv.second.scalar_type())) kv.second = kv.second.to(dtype);
  std::map<std::string, std::string> meta = extra_metadata;
  meta["format"] = "diffnet";
  meta["config"] = to_json(model->config()).dump();
  save_safetensors(path, state, meta);
}

namespace {

// A training checkpoint (RUN/checkpoints/last.safetensors) holds the model as "model.<name>" next to the
// optimizer state, and {"model": config, "train": ...} as its config: its model is usable as is.
bool is_checkpoint(const SafeTensors& st) {
  auto fmt = st.metadata.find("format");
  return fmt != st.metadata.end() && fmt->second == "diffnet-checkpoint";
}

// The model config of a weights file or checkpoint; for a checkpoint also sets metadata "train_size" to
// the run's crop size, the window predict uses by default, as for exported weights.
ModelConfig model_config_of(SafeTensors& st, const std::string& path) {
  auto fmt = st.metadata.find("format");
  if (!is_checkpoint(st) && (fmt == st.metadata.end() || fmt->second != "diffnet"))
    throw Error(path, "not a DiffNet weights file (no __metadata__ format = diffnet; for a timm ConvNeXt-V2 "
                      "checkpoint use `diffnet convert --from timm`)");
  auto cfg_it = st.metadata.find("config");
  if (cfg_it == st.metadata.end()) throw Error(path, "weights file has no model config in its metadata");
  try {
    nlohmann::json j = nlohmann::json::parse(cfg_it->second);
    if (!is_checkpoint(st)) return model_config_from_json(j);
    if (j.contains("train") && j.at("train").contains("size"))
      st.metadata["train_size"] = std::to_string(j.at("train").at("size").get<int64_t>());
    return model_config_from_json(j.at("model"));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path, std::string("invalid model config JSON: ") + e.what());
  } catch (const Error& e) {
    throw Error(path, e.what());
  }
}

}  // namespace

ModelConfig load_model_config(const std::string& path) {
  SafeTensors st = load_safetensors(path);
  return model_config_of(st, path);
}

DiffNet load_model(const std::string& path, std::map<std::string, std::string>* metadata) {
  SafeTensors st = load_safetensors(path);
  const ModelConfig cfg = model_config_of(st, path);
  if (is_checkpoint(st)) {
    std::map<std::string, at::Tensor> model;
    for (auto& kv : st.tensors)
      if (kv.first.rfind("model.", 0) == 0) model[kv.first.substr(6)] = std::move(kv.second);
    st.tensors = std::move(model);
  }
  check_weights_file(cfg, st.tensors, path);
  DiffNet model(cfg);
  load_state_strict(live_tensors(model), st.tensors, path);
  if (metadata) *metadata = st.metadata;
  return model;
}

}  // namespace diffnet
