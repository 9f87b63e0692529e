// Model configuration: presets, ablation switches, validation and JSON (docs/design.md §2.6, §2.7).
#include "diffnet/config.h"

#include <algorithm>
#include <string>

#include "common/json_fields.h"
#include "diffnet/common.h"
#include "diffnet/zero_sum.h"

namespace diffnet {
namespace {

const char* kSubject = "model config";

bool one_of(const std::string& v, std::initializer_list<const char*> options) {
  for (const char* o : options)
    if (v == o) return true;
  return false;
}

std::string join(std::initializer_list<const char*> options) {
  std::string s;
  for (const char* o : options) s += (s.empty() ? "" : "|") + std::string(o);
  return s;
}

void check_choice(const std::string& field, const std::string& v, std::initializer_list<const char*> options) {
  if (!one_of(v, options))
    throw Error(kSubject, field + " = '" + v + "' is not one of " + join(options));
}

// Every field of ModelConfig once, by its JSON name: serialisation, the set of known names and reading
// all come from this list.
template <class C, class F>
void visit_fields(C& c, F&& f) {
  f("preset", c.preset);
  f("backbone", c.backbone);
  f("dims", c.dims);
  f("depths", c.depths);
  f("drop_path_rate", c.drop_path_rate);
  f("dct_head", c.dct_head);
  f("dct_dim", c.dct_dim);
  f("dct_depth", c.dct_depth);
  f("dct_table_bias", c.dct_table_bias);
  f("dct_freq_embed", c.dct_freq_embed);
  f("dct_gamma", c.dct_gamma);
  f("dct_beta", c.dct_beta);
  f("dct_linear", c.dct_linear);
  f("fuse_dct_init", c.fuse_dct_init);
  f("disc_dim", c.disc_dim);
  f("kernel_size", c.kernel_size);
  f("num_filters", c.num_filters);
  f("filter", c.filter);
  f("families", c.families);
  f("activation", c.activation);
  f("disc_impl", c.disc_impl);
  f("disc_on_input", c.disc_on_input);
  f("filter_weight_decay", c.filter_weight_decay);
  f("refine_depth", c.refine_depth);
  f("refine", c.refine);
  f("line_context", c.line_context);
}

}  // namespace

int64_t ModelConfig::num_free_filters() const {
  if (filter != "zero_sum") return num_filters;  // other filter kinds have no families
  if (families == "free") return num_filters;
  if (families == "anchored") return 0;
  return num_filters - num_filters / 2;  // mixed: first half (rounded up) free, the rest anchored
}

void ModelConfig::validate() const {
  auto positive = [](const std::string& field, int64_t v) {
    if (v <= 0) throw Error(kSubject, field + " must be positive, got " + std::to_string(v));
  };
  if (dims.size() != 4) throw Error(kSubject, "dims must have 4 entries, got " + std::to_string(dims.size()));
  if (depths.size() != 4)
    throw Error(kSubject, "depths must have 4 entries, got " + std::to_string(depths.size()));
  for (size_t i = 0; i < 4; ++i) {
    positive("dims[" + std::to_string(i) + "]", dims[i]);
    positive("depths[" + std::to_string(i) + "]", depths[i]);
  }
  if (!(drop_path_rate >= 0.0 && drop_path_rate < 1.0))
    throw Error(kSubject, "drop_path_rate must be in [0, 1), got " + std::to_string(drop_path_rate));
  check_choice("dct_head", dct_head, {"embed", "fph", "none"});
  positive("dct_dim", dct_dim);
  if (dct_depth < 0) throw Error(kSubject, "dct_depth must be >= 0, got " + std::to_string(dct_depth));
  if (!(fuse_dct_init >= 0.0 && fuse_dct_init <= 1.0))
    throw Error(kSubject, "fuse_dct_init must be in [0, 1], got " + std::to_string(fuse_dct_init));
  positive("disc_dim", disc_dim);
  if (kernel_size < 3 || kernel_size % 2 == 0 || kernel_size > 31)
    throw Error(kSubject, "kernel_size must be odd in [3, 31], got " + std::to_string(kernel_size));
  positive("num_filters", num_filters);
  check_choice("filter", filter, {"zero_sum", "free", "srm", "bayar"});
  check_choice("families", families, {"mixed", "free", "anchored"});
  check_choice("activation", activation, {"abs", "none", "tanh"});
  check_choice("disc_impl", disc_impl, {"dense", "fused"});
  if (filter == "srm") {
    if (num_filters != 3) throw Error(kSubject, "filter 'srm' has 3 fixed filters: num_filters must be 3");
    if (kernel_size < 5) throw Error(kSubject, "filter 'srm' needs kernel_size >= 5 (the SRM filters are 5x5)");
  }
  if (refine_depth < 0) throw Error(kSubject, "refine_depth must be >= 0, got " + std::to_string(refine_depth));
  if (!refine && refine_depth != 0)
    throw Error(kSubject, "refine = false requires refine_depth = 0 (A2 moves the blocks to stage 4)");
  if (filter_weight_decay < 0 && filter_weight_decay != -1.0)
    throw Error(kSubject, "filter_weight_decay must be >= 0 or -1 (use the optimizer's), got " +
                              std::to_string(filter_weight_decay));
}

void convnextv2_variant(const std::string& name, std::vector<int64_t>& dims, std::vector<int64_t>& depths) {
  if (name == "atto") dims = {40, 80, 160, 320}, depths = {2, 2, 6, 2};
  else if (name == "femto") dims = {48, 96, 192, 384}, depths = {2, 2, 6, 2};
  else if (name == "pico") dims = {64, 128, 256, 512}, depths = {2, 2, 6, 2};
  else if (name == "nano") dims = {80, 160, 320, 640}, depths = {2, 2, 8, 2};
  else if (name == "tiny") dims = {96, 192, 384, 768}, depths = {3, 3, 9, 3};
  else if (name == "base") dims = {128, 256, 512, 1024}, depths = {3, 3, 27, 3};
  else if (name == "large") dims = {192, 384, 768, 1536}, depths = {3, 3, 27, 3};
  else if (name == "huge") dims = {352, 704, 1408, 2816}, depths = {3, 3, 27, 3};
  else
    throw Error("backbone", "unknown ConvNeXt-V2 variant '" + name +
                                "' (atto|femto|pico|nano|tiny|base|large|huge)");
}

std::vector<std::string> model_preset_names() { return {"atto", "femto", "pico", "nano", "tiny", "base"}; }

ModelConfig model_preset(const std::string& name) {
  ModelConfig c;
  c.preset = name;
  if (name == "base" || name == "tiny") {
    c.backbone = name;
    c.dct_dim = 4;
    c.dct_depth = 6;
    c.disc_dim = 256;
    c.refine_depth = 6;
  } else if (name == "atto" || name == "femto" || name == "pico" || name == "nano") {
    c.backbone = name;  // atto's neck: d = 1, DCT depth 3, D = 64, refine depth 3
    c.dct_dim = 1;
    c.dct_depth = 3;
    c.disc_dim = 64;
    c.refine_depth = 3;
  } else {
    std::string known;
    for (const auto& n : model_preset_names()) known += (known.empty() ? "" : "|") + n;
    throw Error("preset", "unknown preset '" + name + "' (" + known + ")");
  }
  convnextv2_variant(c.backbone, c.dims, c.depths);
  return c;
}

void apply_ablation(ModelConfig& c, const std::string& id) {
  if (id == "A0") c.filter = "free";
  else if (id == "A1") c.dct_head = "fph";
  else if (id == "A2") {
    c.depths[3] += c.refine_depth;
    c.refine_depth = 0;
    c.refine = false;
  } else if (id == "A3") c.dct_table_bias = false;
  else if (id == "A4") c.dct_freq_embed = false;
  else if (id == "A5") c.dct_gamma = false;
  else if (id == "A6") c.dct_beta = false;
  else if (id == "A7") c.dct_linear = true;
  else if (id == "A8") c.dct_dim = 1;
  else if (id == "A9") c.dct_dim = 2;
  else if (id == "A10") c.dct_dim = 8;
  else if (id == "A11") c.kernel_size = 9;
  else if (id == "A12") c.kernel_size = 5;
  else if (id == "A13") c.kernel_size = 3;
  else if (id == "A14") {
    c.filter = "srm";
    c.num_filters = 3;
    c.kernel_size = std::max<int64_t>(c.kernel_size, 5);
  } else if (id == "A15") c.activation = "none";
  else if (id == "A16") c.activation = "tanh";
  else if (id == "A17") c.families = "free";
  else if (id == "A18") c.filter = "bayar";
  else if (id == "A19") c.disc_on_input = true;
  else if (id == "A20") {
    c.filter = "free";
    c.filter_weight_decay = 0.1;
  } else {
    throw Error("ablation", "unknown ablation '" + id + "' (A0..A20)");
  }
  c.disc_impl = ops::zero_sum_impl_for(c.filter, c.activation, c.disc_impl, /*forced=*/true, /*inference=*/false);
}

nlohmann::json to_json(const ModelConfig& c) {
  return fields_to_json(c, [](const auto& cfg, auto&& f) { visit_fields(cfg, f); });
}

ModelConfig model_config_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error(kSubject, "expected a JSON object");
  ModelConfig c;
  // Start from the named preset when given, so a config may list only what differs from it.
  if (j.contains("preset")) {
    if (!j["preset"].is_string()) throw Error(kSubject, "field 'preset' must be a string");
    const std::string p = j["preset"].get<std::string>();
    auto names = model_preset_names();
    if (std::find(names.begin(), names.end(), p) != names.end()) c = model_preset(p);
    c.preset = p;
  }
  // backbone first: it sets dims/depths, which explicit dims/depths then override.
  if (j.contains("backbone")) {
    read_fields(nlohmann::json{{"backbone", j.at("backbone")}}, c,
                [](auto& cfg, auto&& f) { visit_fields(cfg, f); }, kSubject);
    convnextv2_variant(c.backbone, c.dims, c.depths);
  }
  read_fields(j, c, [](auto& cfg, auto&& f) { visit_fields(cfg, f); }, kSubject, {"preset", "backbone"});
  c.validate();
  return c;
}

}  // namespace diffnet
