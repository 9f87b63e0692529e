// Model configuration: presets (docs/design.md §2.6), every ablation switch of §2.7, and JSON (de)serialisation.
// A weights file carries this JSON in its safetensors __metadata__["config"] so it describes its model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace diffnet {

struct ModelConfig {
  std::string preset = "atto";  // informational: the preset this config started from

  // RGB backbone (ConvNeXt-V2).
  std::string backbone = "atto";  // atto|femto|pico|nano|tiny|base|large|huge
  std::vector<int64_t> dims{40, 80, 160, 320};
  std::vector<int64_t> depths{2, 2, 6, 2};
  double drop_path_rate = 0.0;  // stochastic depth, linear over all backbone blocks

  // DCT branch (§2.2).
  std::string dct_head = "embed";  // embed (ours) | fph (A1: DTD's FPH, qtable clamped to 63) | none
  int64_t dct_dim = 1;             // d: channels per frequency; C_dct = 64*d
  int64_t dct_depth = 3;           // ConvNeXt-V2 blocks at C_dct, stride 8
  bool dct_table_bias = true;      // t  (A3 sets false)
  bool dct_freq_embed = true;      // f  (A4 sets false)
  bool dct_gamma = true;           // gamma (A5 sets false)
  bool dct_beta = true;            // beta  (A6 sets false)
  bool dct_linear = false;         // A7: linear map of the coefficient value instead of an embedding

  // Early fusion (§2.3).
  // Init of the fusion 1x1 conv: [identity | trunc_normal(std = fuse_dct_init)] (0 = [identity | 0]).
  // 0.01 by measurement (docs/model.md): with 0 the DCT branch gets no gradient at step 0 and 20-35x smaller
  // gradients for the first steps, some tensors below AdamW's eps.
  double fuse_dct_init = 0.01;

  // Discrepancy transformation (§2.4).
  int64_t disc_dim = 64;        // D
  int64_t kernel_size = 7;      // K (odd)
  int64_t num_filters = 2;      // M per channel
  std::string filter = "zero_sum";  // zero_sum | free (A0/A20) | srm (A14) | bayar (A18)
  std::string families = "mixed";   // mixed (first half free, second half centre-anchored) | free | anchored (A17)
  std::string activation = "abs";   // abs | none (A15) | tanh (A16)
  // fused (hand-written op, measured faster: docs/model.md) | dense (reference). What actually runs is
  // decided in one place, ops::zero_sum_impl_for (include/diffnet/zero_sum.h): dense where fused does not
  // apply (activation != abs or filter != zero_sum), fused in inference unless set_disc_impl("dense").
  std::string disc_impl = "fused";
  bool disc_on_input = false;       // A19: apply the filters to the input image as an extra modality
  // Weight decay for the discrepancy filter parameters (theta); -1 = the optimizer's (A20 sets 0.1).
  double filter_weight_decay = -1.0;

  // Decoder (§2.5).
  int64_t refine_depth = 3;   // ConvNeXt-V2 blocks at D on P2
  bool refine = true;         // A2: false moves the refinement blocks to stage 4 of the backbone
  // Line context (ours, not in the paper): P1's rows compared with the window's other rows before the
  // pixel head (model/line_context.h). Off in the presets; weights without it load as before.
  bool line_context = false;

  // Number of filters of each family for the current settings: free first, then centre-anchored.
  int64_t num_free_filters() const;

  // Throws diffnet::Error naming the field when a value is out of range or inconsistent.
  void validate() const;
};

// Presets: "base", "tiny", "atto" (docs/design.md §2.6), plus "nano" and "femto"/"pico" backbones with atto's neck.
// Throws Error for an unknown name (listing the known ones).
ModelConfig model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

// Applies one of the paper's ablations "A0".."A20" to a config (docs/design.md §2.7); throws for unknown ids.
void apply_ablation(ModelConfig& cfg, const std::string& id);

// ConvNeXt-V2 variant dims/depths; throws for unknown names.
void convnextv2_variant(const std::string& name, std::vector<int64_t>& dims, std::vector<int64_t>& depths);

nlohmann::json to_json(const ModelConfig& cfg);
// Missing fields keep their defaults; unknown fields are an error (a typo must not pass silently).
ModelConfig model_config_from_json(const nlohmann::json& j);

}  // namespace diffnet
