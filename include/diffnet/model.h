// The DiffNet model (docs/design.md §2): ConvNeXt-V2 RGB branch, DCT joint-embedding branch, early fusion,
// multi-level zero-sum discrepancy transformation, FPN + refinement decoder, pixel and image heads.
// Module registration names follow docs/design.md §7 so state-dict keys are the weight names.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "diffnet/config.h"

namespace diffnet {

struct DiffNetParts;  // the submodules, defined in src/model/diffnet_parts.h

struct DiffNetOutput {
  at::Tensor seg_logits;  // (B, 2, H, W); softmax channel 1 = tampered
  at::Tensor cls_logits;  // (B, 2)
};

// ImageNet mean/std used to normalise RGB (docs/design.md §3.3).
constexpr double kRgbMean[3] = {0.485, 0.456, 0.406};
constexpr double kRgbStd[3] = {0.229, 0.224, 0.225};

// The ConvNeXt-V2 blocks' Linear layers (most of the model's time on a CPU) run either as LibTorch's
// Linear (the BLAS, "blas") or as the same product written as a 1x1 convolution on the channels_last
// activations (oneDNN, "onednn"): the faster one depends on the CPU and the BLAS, so by default ("auto")
// it is measured once per process at the first float32 CPU use; $DIFFNET_LINEAR=blas|onednn overrides.
// linear_backend() says which one is used (measuring it first if needed).
void set_linear_backend(const std::string& choice);  // "auto" | "blas" | "onednn"; Error otherwise
std::string linear_backend();

// uint8 RGB (B, H, W, 3) or (H, W, 3) -> float32 (B, 3, H, W) normalised, channels_last.
at::Tensor normalize_rgb(const at::Tensor& rgb_u8);

class DiffNetImpl : public torch::nn::Module {
 public:
  explicit DiffNetImpl(const ModelConfig& cfg);

  // rgb: float (B, 3, H, W) normalised (normalize_rgb); dct: uint8 or int64 (B, H, W), values 0..20;
  // qt: int64 (B, 64) natural-order luma tables (1..255). H and W must be multiples of 32
  // (callers pad); otherwise throws diffnet::Error. Outputs are float32. The model may be converted with
  // model->to(at::kBFloat16) for inference (rgb is cast to the model's dtype; the discrepancy filters run
  // in float32): measured 1.9x faster for `base` at 768, slower for `atto` (docs/model.md).
  DiffNetOutput forward(const at::Tensor& rgb, const at::Tensor& dct, const at::Tensor& qt);

  const ModelConfig& config() const { return cfg_; }

  // Selects the discrepancy implementation ("dense" | "fused") at run time.
  void set_disc_impl(const std::string& impl);

  // The submodules (rgb, dct, fuse, disc, decoder, cls_head; see src/model/diffnet_parts.h).
  DiffNetParts& parts() { return *parts_; }

  // Profiling hook: forward() calls fn(part) after each part ("start", "rgb.stage1", "dct", "rgb.stage2",
  // "rgb.stage3", "rgb.stage4", "discrepancy", "decoder", "cls_head"). Empty function: no calls.
  void set_trace(std::function<void(const char*)> fn) { trace_ = std::move(fn); }

 private:
  std::function<void(const char*)> trace_;
  ModelConfig cfg_;
  std::shared_ptr<DiffNetParts> parts_;
};
TORCH_MODULE(DiffNet);

// Named parameters and buffers (docs/design.md §7 names), CPU, in the model's dtype.
std::map<std::string, at::Tensor> model_state(DiffNet& model);

// Loads tensors into the model. Strict: unknown, missing or mis-shaped tensors are an Error naming the
// tensor. Values are converted to the model's dtype (so fp16 files load into fp32 models).
void load_model_state(DiffNet& model, const std::map<std::string, at::Tensor>& tensors);
// Name prefix of the line context's tensors (config line_context; docs/design.md §2.5).
inline constexpr char kLineContextPrefix[] = "decoder.line.";
// The start of a fine-tune: as load_model_state, except that when the model has the line context
// (decoder.line.*) and the tensors hold none of it, that part keeps the model's own initialisation (its
// output starts at zero: the file's model unchanged). Returns true when it did so.
bool load_model_state_for_init(DiffNet& model, const std::map<std::string, at::Tensor>& tensors);

// Weights files: safetensors with __metadata__ {"format":"diffnet","config":<json>, ...extra}.
// dtype: at::kFloat or at::kHalf (storage only; the model keeps computing in fp32).
void save_model(DiffNet& model, const std::string& path, at::ScalarType dtype = at::kFloat,
                const std::map<std::string, std::string>& extra_metadata = {});
// Builds the model from the file's config and loads its weights; metadata (if wanted) is returned.
// Also reads a training checkpoint (format diffnet-checkpoint): its "model.*" tensors and the model part
// of its config, with metadata "train_size" set to the run's crop size. Refused before building: non-finite
// tensors, and a config whose backbone needs more parameters than the file holds.
DiffNet load_model(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);
// Only the model config such a file (weights or checkpoint) carries, without building the model.
ModelConfig load_model_config(const std::string& path);

// Imports an ImageNet ConvNeXt-V2 checkpoint (safetensors, timm names `stem.*`, `stages.i.blocks.j.*` or the
// official `downsample_layers.*`, `stages.i.j.*`) into the rgb.* tensors of `model`; head.* / norm.* (the
// classifier) are ignored. fc weights may be 2-D or 4-D (out,in,1,1) and GRN tensors any rank (matched by
// element count). Strict: an unknown, missing or mis-shaped tensor is an Error naming it. Blocks beyond the
// config's backbone variant depth (ablation A2) keep their initialisation. Returns the number imported.
int64_t import_convnextv2(DiffNet& model, const std::string& path);

}  // namespace diffnet
