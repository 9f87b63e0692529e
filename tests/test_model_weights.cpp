// Weights files (save/load, strict errors), the ConvNeXt-V2 checkpoint importer and the model CLI commands.
#include <nlohmann/json.hpp>

#include <cmath>

#include "diffnet/common.h"
#include "diffnet/model.h"
#include "diffnet/safetensors.h"
#include "model/diffnet_parts.h"
#include "model/model_info.h"
#include "testing.h"

using namespace diffnet;
using diffnet::testutil::max_abs_diff;

namespace {

struct Inputs {
  at::Tensor rgb, dct, qt;
};

Inputs make_inputs(int64_t B, int64_t H, int64_t W) {
  torch::manual_seed(11);
  return {torch::randn({B, 3, H, W}), torch::randint(0, 21, {B, H, W}, at::kLong),
          torch::randint(1, 256, {B, 64}, at::kLong)};
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A small custom backbone so the fixtures stay tiny.
ModelConfig small_config() {
  ModelConfig c = model_preset("atto");
  c.dims = {8, 16, 24, 32};
  c.depths = {1, 1, 2, 1};
  c.disc_dim = 8;
  c.dct_depth = 1;
  c.refine_depth = 1;
  return c;
}

// A ConvNeXt-V2 checkpoint written from the published layout (docs/design.md §7.2), random
// values. timm names (conv_mlp: 4-D fc weights as for atto..nano) or the official names.
std::map<std::string, at::Tensor> convnext_fixture(const std::vector<int64_t>& dims, const std::vector<int64_t>& depths,
                                                   bool conv_mlp, bool official) {
  std::map<std::string, at::Tensor> t;
  auto r = [](std::vector<int64_t> shape) { return torch::randn(shape); };
  const std::string stem = official ? "downsample_layers.0." : "stem.";
  t[stem + "0.weight"] = r({dims[0], 3, 4, 4});
  t[stem + "0.bias"] = r({dims[0]});
  t[stem + "1.weight"] = r({dims[0]});
  t[stem + "1.bias"] = r({dims[0]});
  for (int i = 0; i < 4; ++i) {
    const int64_t C = dims[i];
    if (i > 0) {
      const std::string ds = official ? "downsample_layers." + std::to_string(i) + "."
                                      : "stages." + std::to_string(i) + ".downsample.";
      t[ds + "0.weight"] = r({dims[i - 1]});
      t[ds + "0.bias"] = r({dims[i - 1]});
      t[ds + "1.weight"] = r({C, dims[i - 1], 2, 2});
      t[ds + "1.bias"] = r({C});
    }
    for (int j = 0; j < depths[i]; ++j) {
      if (official) {
        const std::string b = "stages." + std::to_string(i) + "." + std::to_string(j) + ".";
        t[b + "dwconv.weight"] = r({C, 1, 7, 7});
        t[b + "dwconv.bias"] = r({C});
        t[b + "norm.weight"] = r({C});
        t[b + "norm.bias"] = r({C});
        t[b + "pwconv1.weight"] = r({4 * C, C});
        t[b + "pwconv1.bias"] = r({4 * C});
        t[b + "grn.gamma"] = r({1, 1, 1, 4 * C});
        t[b + "grn.beta"] = r({1, 1, 1, 4 * C});
        t[b + "pwconv2.weight"] = r({C, 4 * C});
        t[b + "pwconv2.bias"] = r({C});
      } else {
        const std::string b = "stages." + std::to_string(i) + ".blocks." + std::to_string(j) + ".";
        t[b + "conv_dw.weight"] = r({C, 1, 7, 7});
        t[b + "conv_dw.bias"] = r({C});
        t[b + "norm.weight"] = r({C});
        t[b + "norm.bias"] = r({C});
        t[b + "mlp.fc1.weight"] = conv_mlp ? r({4 * C, C, 1, 1}) : r({4 * C, C});
        t[b + "mlp.fc1.bias"] = r({4 * C});
        t[b + "mlp.grn.weight"] = r({4 * C});
        t[b + "mlp.grn.bias"] = r({4 * C});
        t[b + "mlp.fc2.weight"] = conv_mlp ? r({C, 4 * C, 1, 1}) : r({C, 4 * C});
        t[b + "mlp.fc2.bias"] = r({C});
      }
    }
  }
  if (official) {
    t["norm.weight"] = r({dims[3]});
    t["norm.bias"] = r({dims[3]});
    t["head.weight"] = r({1000, dims[3]});
    t["head.bias"] = r({1000});
  } else {
    t["head.norm.weight"] = r({dims[3]});
    t["head.norm.bias"] = r({dims[3]});
    t["head.fc.weight"] = r({1000, dims[3]});
    t["head.fc.bias"] = r({1000});
  }
  return t;
}

// Official -> timm rename (reference table), written independently of the importer.
std::string official_to_timm(std::string n) {
  auto replace = [&](const std::string& a, const std::string& b) {
    auto p = n.find(a);
    if (p != std::string::npos) n.replace(p, a.size(), b);
  };
  if (n.rfind("downsample_layers.0.", 0) == 0) return "stem." + n.substr(20);
  if (n.rfind("downsample_layers.", 0) == 0) return "stages." + n.substr(18, 1) + ".downsample." + n.substr(20);
  // stages.i.j.x -> stages.i.blocks.j.x
  n = "stages." + n.substr(7, 2) + "blocks." + n.substr(9);
  replace("dwconv", "conv_dw");
  replace("pwconv1", "mlp.fc1");
  replace("pwconv2", "mlp.fc2");
  replace("grn.gamma", "mlp.grn.weight");
  replace("grn.beta", "mlp.grn.bias");
  return n;
}

void expect_imported(DiffNet& m, const std::map<std::string, at::Tensor>& fx, bool official) {
  auto state = model_state(m);
  int64_t checked = 0;
  for (const auto& kv : fx) {
    if (kv.first.rfind("head.", 0) == 0 || kv.first.rfind("norm.", 0) == 0) continue;
    const std::string name = "rgb." + (official ? official_to_timm(kv.first) : kv.first);
    ASSERT_TRUE(state.count(name)) << name;
    EXPECT_EQ(kv.second.numel(), state[name].numel()) << name;
    EXPECT_TRUE(state[name].flatten().equal(kv.second.flatten())) << name;
    ++checked;
  }
  int64_t rgb = 0;
  for (const auto& kv : state) rgb += kv.first.rfind("rgb.", 0) == 0;
  EXPECT_EQ(checked, rgb);
}

}  // namespace

TEST(ModelWeights, SaveLoadRoundTrip) {
  torch::manual_seed(7);
  ModelConfig cfg = model_preset("atto");
  apply_ablation(cfg, "A12");  // a non-default config must come back from the file
  DiffNet m(cfg);
  {
    torch::NoGradGuard ng;  // make the zero-initialised tensors non-trivial
    for (auto& p : m->parameters()) p.add_(torch::randn_like(p).mul_(0.01));
  }
  m->eval();
  Inputs in = make_inputs(1, 64, 96);
  torch::NoGradGuard ng;
  DiffNetOutput ref = m->forward(in.rgb, in.dct, in.qt);
  const std::string dir = testutil::temp_dir("model-weights");
  save_model(m, dir + "/m32.safetensors", at::kFloat, {{"note", "hello"}});
  save_model(m, dir + "/m16.safetensors", at::kHalf);

  std::map<std::string, std::string> meta;
  DiffNet a = load_model(dir + "/m32.safetensors", &meta);
  EXPECT_EQ(meta["format"], "diffnet");
  EXPECT_EQ(meta["note"], "hello");
  EXPECT_EQ(a->config().kernel_size, 5);
  EXPECT_EQ(nlohmann::json::parse(meta["config"]), to_json(cfg));
  a->eval();
  DiffNetOutput oa = a->forward(in.rgb, in.dct, in.qt);
  EXPECT_TRUE(oa.seg_logits.equal(ref.seg_logits));
  EXPECT_TRUE(oa.cls_logits.equal(ref.cls_logits));

  SafeTensors raw = load_safetensors(dir + "/m16.safetensors");
  EXPECT_EQ(raw.tensors.at("rgb.stem.0.weight").scalar_type(), at::kHalf);
  EXPECT_EQ(raw.tensors.size(), model_state(m).size());
  DiffNet b = load_model(dir + "/m16.safetensors");
  b->eval();
  DiffNetOutput ob = b->forward(in.rgb, in.dct, in.qt);
  const double scale = ref.seg_logits.abs().max().item<double>();
  EXPECT_LT(max_abs_diff(ob.seg_logits, ref.seg_logits), 1e-2 * scale + 1e-4);
  EXPECT_GT(max_abs_diff(ob.seg_logits, ref.seg_logits), 0.0);  // fp16 storage really rounds
  for (const auto& p : b->parameters()) EXPECT_EQ(p.scalar_type(), at::kFloat);
}

TEST(ModelWeights, StrictLoadErrorsNameTheTensor) {
  DiffNet m(small_config());
  auto good = model_state(m);
  auto s = good;
  s["rgb.stages.0.blocks.0.gamma"] = torch::zeros({8});
  EXPECT_NE(error_of([&] { load_model_state(m, s); }).find("unknown tensor 'rgb.stages.0.blocks.0.gamma'"),
            std::string::npos);
  s = good;
  s.erase("disc.2.theta");
  EXPECT_NE(error_of([&] { load_model_state(m, s); }).find("missing tensor 'disc.2.theta'"), std::string::npos);
  s = good;
  s["decoder.head.0.weight"] = torch::zeros({8, 8, 1, 1});
  const std::string e = error_of([&] { load_model_state(m, s); });
  EXPECT_NE(e.find("'decoder.head.0.weight' has wrong shape: got [8, 8, 1, 1], expected [8, 8, 3, 3]"),
            std::string::npos)
      << e;
  // A failed load leaves the model untouched.
  EXPECT_TRUE(model_state(m)["decoder.head.0.weight"].equal(good["decoder.head.0.weight"]));

  const std::string dir = testutil::temp_dir("model-weights-err");
  save_safetensors(dir + "/plain.safetensors", {{"x", torch::zeros({2})}});
  EXPECT_NE(error_of([&] { load_model(dir + "/plain.safetensors"); }).find("not a DiffNet weights file"),
            std::string::npos);
  save_safetensors(dir + "/badcfg.safetensors", {{"x", torch::zeros({2})}},
                   {{"format", "diffnet"}, {"config", R"({"kernel_size": 7, "colour": "red"})"}});
  EXPECT_NE(error_of([&] { load_model(dir + "/badcfg.safetensors"); }).find("unknown field 'colour'"),
            std::string::npos);
}

// A fine-tune that adds the line context starts as the file's model: same outputs, the new part learns.
TEST(ModelWeights, InitWithoutLineContextStartsAsTheFilesModel) {
  torch::manual_seed(3);
  DiffNet plain(small_config());
  {
    torch::NoGradGuard ng;  // make the zero-initialised tensors non-trivial
    for (auto& p : plain->parameters()) p.add_(torch::randn_like(p).mul_(0.05));
  }
  ModelConfig cfg = small_config();
  cfg.line_context = true;
  DiffNet lined(cfg);
  const auto file = model_state(plain);
  // The strict loader names the part the file lacks; the fine-tune loader fills it in.
  EXPECT_NE(error_of([&] { load_model_state(lined, file); }).find("missing tensor 'decoder.line."), std::string::npos);
  EXPECT_TRUE(load_model_state_for_init(lined, file));
  EXPECT_FALSE(load_model_state_for_init(plain, file));
  auto partial = model_state(lined);
  partial.erase("decoder.line.mix.weight");  // part of the part present: strict again
  EXPECT_NE(error_of([&] { load_model_state_for_init(lined, partial); }).find("missing tensor 'decoder.line.mix.weight'"),
            std::string::npos);
  Inputs in = make_inputs(2, 64, 64);
  plain->eval();
  lined->eval();
  {
    torch::NoGradGuard ng;
    DiffNetOutput a = plain->forward(in.rgb, in.dct, in.qt), b = lined->forward(in.rgb, in.dct, in.qt);
    EXPECT_EQ(max_abs_diff(a.seg_logits, b.seg_logits), 0.0);
    EXPECT_EQ(max_abs_diff(a.cls_logits, b.cls_logits), 0.0);
  }
  lined->train();
  DiffNetOutput o = lined->forward(in.rgb, in.dct, in.qt);
  at::cross_entropy_loss(o.seg_logits, torch::randint(0, 2, {2, 64, 64}, at::kLong)).backward();
  EXPECT_GT(lined->parts().decoder->line->out->weight.grad().abs().max().item<double>(), 0.0);
  int64_t sum = 0;  // info's per-module table counts the part
  for (const auto& c : model_costs(lined, 64, 64)) sum += c.params;
  EXPECT_EQ(sum, count_parameters(lined));
  EXPECT_EQ(count_parameters(lined, "decoder.line."), (8 + 1) + (17 * 8 * 5 + 8) + (8 * 8 + 8));
  // Saved and loaded, the part comes back with the config.
  const std::string dir = testutil::temp_dir("model-weights-line");
  save_model(lined, dir + "/lined.safetensors");
  DiffNet back = load_model(dir + "/lined.safetensors");
  EXPECT_TRUE(back->config().line_context);
  EXPECT_TRUE(model_state(back).at("decoder.line.attn.weight").equal(model_state(lined).at("decoder.line.attn.weight")));
}

TEST(ModelWeights, DamagedFilesAreRefusedBeforeUse) {
  const std::string dir = testutil::temp_dir("model-weights-damaged");
  DiffNet m(small_config());
  const std::string good = dir + "/good.safetensors";
  save_model(m, good, at::kFloat);
  SafeTensors st = load_safetensors(good);
  // One NaN and one infinity: errors naming the file and the tensor, whatever the stored dtype.
  for (const auto& [value, dtype] : {std::pair{NAN, at::kFloat}, std::pair{INFINITY, at::kHalf}}) {
    auto tensors = st.tensors;
    at::Tensor t = tensors.at("decoder.head.0.weight").clone();
    t.view(-1)[3] = value;
    tensors["decoder.head.0.weight"] = t.to(dtype);
    const std::string path = dir + "/nan.safetensors";
    save_safetensors(path, tensors, st.metadata);
    const std::string e = error_of([&] { load_model(path); });
    EXPECT_NE(e.find(path + ": tensor 'decoder.head.0.weight' has non-finite values"), std::string::npos) << e;
  }
  // Absurd dims in the config: refused from the file's tensor count, before building the model
  // (8 * depth * dim^2 lower bound: 8 * 2 * 100000^2 = 1.6e11 parameters, the file holds far fewer).
  nlohmann::json cfg = nlohmann::json::parse(st.metadata.at("config"));
  cfg["dims"] = {100000, 100000, 100000, 100000};
  auto meta = st.metadata;
  meta["config"] = cfg.dump();
  const std::string huge = dir + "/huge.safetensors";
  save_safetensors(huge, st.tensors, meta);
  const std::string e = error_of([&] { load_model(huge); });
  EXPECT_NE(e.find(huge + ": model config dims [100000, 100000, 100000, 100000] need at least"), std::string::npos)
      << e;
}

TEST(ModelWeights, ImportTimmConvMlpLayoutAtto) {
  torch::manual_seed(8);
  DiffNet m(model_preset("atto"));
  auto fx = convnext_fixture(m->config().dims, m->config().depths, /*conv_mlp=*/true, /*official=*/false);
  const std::string path = testutil::temp_dir("timm") + "/model.safetensors";
  save_safetensors(path, fx);
  auto before = model_state(m);
  EXPECT_EQ(import_convnextv2(m, path), static_cast<int64_t>(fx.size()) - 4);  // head.* ignored
  expect_imported(m, fx, false);
  auto after = model_state(m);
  EXPECT_TRUE(after["disc.0.theta"].equal(before["disc.0.theta"]));  // only rgb.* changes

  // A2 moves the 3 refinement blocks to stage 4: they have no ImageNet weights and keep their init.
  ModelConfig a2 = model_preset("atto");
  apply_ablation(a2, "A2");
  DiffNet m2(a2);
  auto init = model_state(m2);
  EXPECT_EQ(import_convnextv2(m2, path), static_cast<int64_t>(fx.size()) - 4);
  auto s2 = model_state(m2);
  EXPECT_TRUE(s2["rgb.stages.3.blocks.1.mlp.fc1.weight"].equal(fx["stages.3.blocks.1.mlp.fc1.weight"].view({1280, 320})));
  EXPECT_TRUE(s2["rgb.stages.3.blocks.4.mlp.fc1.weight"].equal(init["rgb.stages.3.blocks.4.mlp.fc1.weight"]));
}

TEST(ModelWeights, ImportLinearLayoutAndOfficialNames) {
  for (bool official : {false, true}) {
    torch::manual_seed(9);
    DiffNet m(small_config());
    auto fx = convnext_fixture(m->config().dims, m->config().depths, false, official);
    const std::string path = testutil::temp_dir("timm2") + "/model.safetensors";
    save_safetensors(path, fx);
    import_convnextv2(m, path);
    expect_imported(m, fx, official);
  }
}

TEST(ModelWeights, ImportErrorsNameTheTensor) {
  DiffNet m(small_config());
  const auto dims = m->config().dims, depths = m->config().depths;
  const std::string dir = testutil::temp_dir("timm-err");
  auto try_import = [&](const std::map<std::string, at::Tensor>& fx) {
    save_safetensors(dir + "/x.safetensors", fx);
    return error_of([&] { import_convnextv2(m, dir + "/x.safetensors"); });
  };
  auto fx = convnext_fixture(dims, depths, false, false);
  fx["stages.0.blocks.0.gamma"] = torch::zeros({8});  // a V1 layer scale: not a V2 tensor
  EXPECT_NE(try_import(fx).find("unknown tensor 'stages.0.blocks.0.gamma'"), std::string::npos);
  fx = convnext_fixture(dims, depths, false, false);
  fx["stages.0.blocks.5.norm.weight"] = torch::zeros({8});  // deeper than the model
  EXPECT_NE(try_import(fx).find("unknown tensor 'stages.0.blocks.5.norm.weight'"), std::string::npos);
  fx = convnext_fixture(dims, depths, false, false);
  fx.erase("stages.2.blocks.1.mlp.fc2.bias");
  EXPECT_NE(try_import(fx).find("missing tensor 'rgb.stages.2.blocks.1.mlp.fc2.bias'"), std::string::npos);
  fx = convnext_fixture(dims, depths, false, false);
  fx["stages.1.downsample.1.weight"] = torch::zeros({16, 8, 3, 3});
  std::string e = try_import(fx);
  EXPECT_NE(e.find("'stages.1.downsample.1.weight' has wrong shape: got [16, 8, 3, 3], expected [16, 8, 2, 2]"),
            std::string::npos)
      << e;
  fx = convnext_fixture(dims, depths, false, false);
  fx["stages.0.blocks.0.mlp.fc1.weight"] = torch::zeros({16, 8});  // same rank, wrong size
  EXPECT_NE(try_import(fx).find("'stages.0.blocks.0.mlp.fc1.weight' has wrong shape"), std::string::npos);
  // A different variant's checkpoint: shapes do not match.
  std::vector<int64_t> adims, adepths;
  convnextv2_variant("atto", adims, adepths);
  EXPECT_NE(try_import(convnext_fixture(adims, adepths, true, false)).find("wrong shape"), std::string::npos);
}

TEST(ModelWeights, CliConvertInfoBench) {
  const std::string dir = testutil::temp_dir("model-cli");
  std::vector<int64_t> dims, depths;
  convnextv2_variant("atto", dims, depths);
  torch::manual_seed(10);
  auto fx = convnext_fixture(dims, depths, true, false);
  save_safetensors(dir + "/timm.safetensors", fx);
  auto r = testutil::run_cli("convert --from timm '" + dir + "/timm.safetensors' --preset atto '" + dir +
                             "/atto.safetensors'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  DiffNet m = load_model(dir + "/atto.safetensors");
  expect_imported(m, fx, false);

  r = testutil::run_cli("convert --from timm '" + dir + "/timm.safetensors' --preset tiny '" + dir + "/t.safetensors'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("wrong shape"), std::string::npos) << r.err;

  r = testutil::run_cli("info --preset base --size 768 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backbone_params"].get<int64_t>(), 87690752);
  EXPECT_GT(j["total_flops"].get<double>(), j["backbone_flops"].get<double>());
  r = testutil::run_cli("info --weights '" + dir + "/atto.safetensors'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3386760"), std::string::npos) << r.out;
  r = testutil::run_cli("info --preset atto --size 100");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("multiple of 32"), std::string::npos);

  r = testutil::run_cli("bench --preset atto --size 64 --iters 1 --warmup 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["median_ms"].get<double>(), 0.0);
  // --parts: a time and the analytic FLOPs of each traced part, the FLOPs summing to the model's.
  r = testutil::run_cli("bench --preset atto --size 64 --batch 2 --iters 1 --warmup 0 --parts --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("parts_ms") && j.contains("parts_gflop")) << r.out;
  EXPECT_EQ(j["parts_ms"].size(), 8u) << r.out;
  double part_sum = 0;
  for (const auto& kv : j["parts_ms"].items()) {
    ASSERT_TRUE(j["parts_gflop"].contains(kv.key())) << kv.key();
    part_sum += j["parts_gflop"][kv.key()].get<double>();
  }
  EXPECT_EQ(j["parts_gflop"].size(), j["parts_ms"].size());
  EXPECT_NEAR(part_sum, j["gflop_per_it"].get<double>(), 1e-9 * part_sum);
  EXPECT_GT(j["matrix_gflop_per_s"].get<double>(), 0.1);
  r = testutil::run_cli("bench --preset atto --size 64 --mode train --batch 1 --iters 1 --warmup 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["mode"], "train");
}
