// Import of ImageNet ConvNeXt-V2 checkpoints (timm or official names) into DiffNet's rgb.* tensors.
#include <torch/torch.h>

#include <regex>

#include "diffnet/common.h"
#include "diffnet/model.h"
#include "diffnet/safetensors.h"
#include "model/weights_check.h"

namespace diffnet {
namespace {

// Checkpoint name -> model name under rgb. ("" when the name is not a backbone tensor).
std::string map_name(const std::string& n) {
  static const std::regex timm_re(
      R"(^(stem\.[01]\.(weight|bias)|stages\.\d+\.downsample\.[01]\.(weight|bias)|)"
      R"(stages\.\d+\.blocks\.\d+\.(conv_dw|norm|mlp\.fc1|mlp\.grn|mlp\.fc2)\.(weight|bias))$)");
  std::smatch m;
  if (std::regex_match(n, timm_re)) return n;
  static const std::regex ds_re(R"(^downsample_layers\.(\d+)\.([01])\.(weight|bias)$)");
  if (std::regex_match(n, m, ds_re)) {
    if (m[1] == "0") return "stem." + m[2].str() + "." + m[3].str();
    return "stages." + m[1].str() + ".downsample." + m[2].str() + "." + m[3].str();
  }
  static const std::regex blk_re(R"(^stages\.(\d+)\.(\d+)\.(dwconv|norm|pwconv1|pwconv2|grn)\.(weight|bias|gamma|beta)$)");
  if (std::regex_match(n, m, blk_re)) {
    const std::string layer = m[3], param = m[4];
    std::string base = "stages." + m[1].str() + ".blocks." + m[2].str() + ".";
    if (layer == "grn") {
      if (param == "gamma") return base + "mlp.grn.weight";
      if (param == "beta") return base + "mlp.grn.bias";
      return "";
    }
    if (param != "weight" && param != "bias") return "";
    const std::string mapped = layer == "dwconv" ? "conv_dw" : layer == "pwconv1" ? "mlp.fc1"
                               : layer == "pwconv2" ? "mlp.fc2" : "norm";
    return base + mapped + "." + param;
  }
  return "";
}

bool is_classifier(const std::string& n) {
  return n.rfind("head.", 0) == 0 || n.rfind("norm.", 0) == 0;
}

}  // namespace

int64_t import_convnextv2(DiffNet& model, const std::string& path) {
  SafeTensors st = load_safetensors(path);
  // Blocks beyond the named variant's depth (ablation A2 adds the refinement blocks to stage 4) have no
  // ImageNet weights and keep their initialisation.
  const ModelConfig& cfg = model->config();
  std::vector<int64_t> vdims, vdepths;
  convnextv2_variant(cfg.backbone, vdims, vdepths);
  auto is_extra_block = [&](const std::string& key) {
    for (int i = 0; i < 4; ++i) {
      const std::string pre = "rgb.stages." + std::to_string(i) + ".blocks.";
      if (key.rfind(pre, 0) != 0) continue;
      return std::stoll(key.substr(pre.size())) >= vdepths[i];
    }
    return false;
  };
  std::map<std::string, at::Tensor> target;
  for (const auto& kv : model->named_parameters(true))
    if (kv.key().rfind("rgb.", 0) == 0 && !is_extra_block(kv.key())) target[kv.key()] = kv.value();
  std::map<std::string, at::Tensor> src;
  std::map<std::string, std::string> origin;  // model name -> checkpoint name (for messages)
  for (const auto& kv : st.tensors) {
    const std::string& name = kv.first;
    if (is_classifier(name)) continue;  // classifier head / final norm: DiffNet does dense prediction
    const std::string mapped = map_name(name);
    if (mapped.empty()) throw Error(path, "unknown tensor '" + name + "' (not a ConvNeXt-V2 backbone tensor)");
    const std::string key = "rgb." + mapped;
    auto it = target.find(key);
    if (it == target.end())
      throw Error(path, "unknown tensor '" + name + "' (the model has no '" + key + "': wrong variant?)");
    if (origin.count(key)) throw Error(path, "tensors '" + origin[key] + "' and '" + name + "' both map to '" + key + "'");
    at::Tensor t = kv.second;
    const at::Tensor& want = it->second;
    const bool reshapable = key.find(".mlp.grn.") != std::string::npos ||
                            ((key.find(".mlp.fc1.weight") != std::string::npos ||
                              key.find(".mlp.fc2.weight") != std::string::npos) &&
                             t.dim() == 4 && t.size(2) == 1 && t.size(3) == 1);
    if (t.sizes() != want.sizes()) {
      if (!reshapable || t.numel() != want.numel())
        throw Error(path, "tensor '" + name + "' has wrong shape: got " + shape_str(t.sizes().vec()) + ", expected " +
                              shape_str(want.sizes().vec()) + " (for " + key + ")");
      t = t.reshape(want.sizes());
    }
    if (!at::isFloatingType(t.scalar_type()))
      throw Error(path, "tensor '" + name + "' has non-float dtype " + c10::str(t.scalar_type()));
    src[key] = t;
    origin[key] = name;
  }
  load_state_strict(target, src, path);
  return static_cast<int64_t>(src.size());
}

}  // namespace diffnet
