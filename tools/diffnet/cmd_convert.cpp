// diffnet convert --from timm IN --preset P OUT: a DiffNet weights file whose rgb.* tensors come from an
// ImageNet ConvNeXt-V2 checkpoint (timm model.safetensors or official names); the rest is freshly initialised.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "diffnet/common.h"
#include "diffnet/model.h"

namespace diffnet::cli {
namespace {

struct ConvertOptions {
  std::string from = "timm";
  std::string input, output;
  std::string preset = "atto";
  std::vector<std::string> ablations;
  std::string dtype = "f32";
  uint64_t seed = 0;
};

void run(const ConvertOptions& o) {
  if (o.from != "timm") throw Error("convert", "--from must be 'timm', got '" + o.from + "'");
  if (o.dtype != "f32" && o.dtype != "f16") throw Error("convert", "--dtype must be f32 or f16");
  ModelConfig cfg = model_preset(o.preset);
  for (const auto& a : o.ablations) apply_ablation(cfg, a);
  torch::manual_seed(o.seed);
  DiffNet model(cfg);
  const int64_t n = import_convnextv2(model, o.input);
  save_model(model, o.output, o.dtype == "f16" ? at::kHalf : at::kFloat,
             {{"source", "convnextv2 import: " + file_stem(o.input)}});
  std::printf("%s: imported %lld backbone tensors from %s into preset %s (other modules initialised with seed %llu)\n",
              o.output.c_str(), static_cast<long long>(n), o.input.c_str(), o.preset.c_str(),
              static_cast<unsigned long long>(o.seed));
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* sub = app.add_subcommand(
      "convert", "Import an ImageNet ConvNeXt-V2 checkpoint (timm model.safetensors) into a new DiffNet weights file");
  sub->add_option("--from", o->from, "Source format (timm: timm or official ConvNeXt-V2 names)")->capture_default_str();
  sub->add_option("input", o->input, "Checkpoint (.safetensors)")->required();
  sub->add_option("output", o->output, "DiffNet weights file to write (.safetensors)")->required();
  sub->add_option("--preset", o->preset, "DiffNet preset whose backbone matches the checkpoint")->capture_default_str();
  sub->add_option("--ablation", o->ablations, "Paper ablation(s) A0..A20 applied to the preset")->expected(1, -1);
  sub->add_option("--dtype", o->dtype, "Storage dtype: f32 | f16")->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed for the freshly initialised modules")->capture_default_str();
  sub->callback([o] { run(*o); });
}

}  // namespace diffnet::cli
