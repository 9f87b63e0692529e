// diffnet info: per-module parameter counts and analytic forward FLOPs of a preset (or a weights file).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "diffnet/common.h"
#include "diffnet/model.h"
#include "model/model_info.h"

namespace diffnet::cli {
namespace {

struct InfoOptions {
  std::string preset = "atto";
  std::string weights;
  std::vector<std::string> ablations;
  int64_t size = 512;
  bool json = false;
};

void run(const InfoOptions& o) {
  if (o.size <= 0 || o.size % 32 != 0)
    throw Error("info", "--size must be a positive multiple of 32, got " + std::to_string(o.size));
  DiffNet model{nullptr};
  if (!o.weights.empty()) {
    if (!o.ablations.empty()) throw Error("info", "--ablation applies to presets, not to --weights files");
    model = load_model(o.weights);
  } else {
    ModelConfig cfg = model_preset(o.preset);
    for (const auto& a : o.ablations) apply_ablation(cfg, a);
    model = DiffNet(cfg);
  }
  const auto costs = model_costs(model, o.size, o.size);
  int64_t total_p = 0, rgb_p = 0;
  double total_f = 0, rgb_f = 0;
  for (const auto& c : costs) {
    total_p += c.params;
    total_f += c.flops;
    if (c.name.rfind("rgb.", 0) == 0) rgb_p += c.params, rgb_f += c.flops;
  }
  const ModelConfig& cfg = model->config();
  if (o.json) {
    nlohmann::ordered_json j;
    j["preset"] = cfg.preset;
    j["config"] = to_json(cfg);
    j["size"] = o.size;
    j["flops_note"] = "analytic 2*MAC over convs, linears and discrepancy filters, batch 1; norms, activations, "
                      "resizes and pooling ignored";
    nlohmann::ordered_json mods = nlohmann::ordered_json::array();
    for (const auto& c : costs) mods.push_back({{"name", c.name}, {"params", c.params}, {"flops", c.flops}});
    j["modules"] = mods;
    j["backbone_params"] = rgb_p;
    j["backbone_flops"] = rgb_f;
    j["total_params"] = total_p;
    j["total_flops"] = total_f;
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("DiffNet preset %s (backbone convnextv2_%s), input %lldx%lld\n", cfg.preset.c_str(), cfg.backbone.c_str(),
              static_cast<long long>(o.size), static_cast<long long>(o.size));
  std::printf("%-18s %14s %12s\n", "module", "params", "GFLOPs");
  for (const auto& c : costs)
    std::printf("%-18s %14lld %12.3f\n", c.name.c_str(), static_cast<long long>(c.params), c.flops / 1e9);
  std::printf("%-18s %14lld %12.3f\n", "backbone (rgb.*)", static_cast<long long>(rgb_p), rgb_f / 1e9);
  std::printf("%-18s %14lld %12.3f\n", "total", static_cast<long long>(total_p), total_f / 1e9);
  std::printf("FLOPs: analytic 2*MAC over convolutions, linear layers and the discrepancy filters, batch 1;\n"
              "norms, activations, resizes and pooling are not counted.\n");
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto o = std::make_shared<InfoOptions>();
  CLI::App* sub = app.add_subcommand("info", "Per-module parameter counts and forward FLOPs of a DiffNet preset");
  sub->add_option("--preset", o->preset, "Model preset (atto|femto|pico|nano|tiny|base)")->capture_default_str();
  sub->add_option("--weights", o->weights, "Describe the model stored in this weights file instead of a preset");
  sub->add_option("--ablation", o->ablations, "Paper ablation(s) A0..A20 applied to the preset")->expected(1, -1);
  sub->add_option("--size", o->size, "Square input size for the FLOP count (multiple of 32)")->capture_default_str();
  sub->add_flag("--json", o->json, "One JSON object instead of a table");
  sub->callback([o] { run(*o); });
}

}  // namespace diffnet::cli
