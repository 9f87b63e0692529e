// The whole DiffNet: preset shapes, parameter counts, ablations, input errors, gradients.
#include <cmath>
#include <set>

#include "diffnet/common.h"
#include "diffnet/model.h"
#include "model/diffnet_parts.h"
#include "model/model_info.h"
#include "testing.h"

using namespace diffnet;

namespace {

struct Inputs {
  at::Tensor rgb, dct, qt;
};

Inputs make_inputs(int64_t B, int64_t H, int64_t W, uint64_t seed = 0) {
  torch::manual_seed(seed);
  return {torch::randn({B, 3, H, W}), torch::randint(0, 21, {B, H, W}, at::kByte),
          torch::randint(1, 256, {B, 64}, at::kLong)};
}

// ConvNeXt-V2 backbone parameters from the published formulas (docs/design.md §2.1):
// stem 51 C0, downsampler 2 C_i + 4 C_i C_{i+1} + C_{i+1}, block 8 C^2 + 65 C.
int64_t backbone_formula(const std::vector<int64_t>& dims, const std::vector<int64_t>& depths) {
  int64_t n = 51 * dims[0];
  for (int s = 0; s < 4; ++s) {
    if (s > 0) n += 2 * dims[s - 1] + 4 * dims[s - 1] * dims[s] + dims[s];
    n += depths[s] * (8 * dims[s] * dims[s] + 65 * dims[s]);
  }
  return n;
}

// base is built once per process (construction dominates its cost).
DiffNet& base_model() {
  static DiffNet m(model_preset("base"));
  return m;
}

}  // namespace

TEST(ModelNet, PresetOutputShapes) {
  torch::NoGradGuard ng;
  for (const auto& name : model_preset_names()) {
    DiffNet m = name == "base" ? base_model() : DiffNet(model_preset(name));
    m->eval();
    const int64_t H = 64, W = name == "base" ? 64 : 96;
    Inputs in = make_inputs(name == "atto" ? 2 : 1, H, W);
    DiffNetOutput out = m->forward(in.rgb, in.dct, in.qt);
    EXPECT_EQ(out.seg_logits.sizes(), at::IntArrayRef({in.rgb.size(0), 2, H, W})) << name;
    EXPECT_EQ(out.cls_logits.sizes(), at::IntArrayRef({in.rgb.size(0), 2})) << name;
    EXPECT_TRUE(torch::isfinite(out.seg_logits).all().item<bool>()) << name;
  }
}

TEST(ModelNet, ParameterCounts) {
  DiffNet base = base_model();
  EXPECT_EQ(count_parameters(base, "rgb."), 87690752);
  DiffNet atto(model_preset("atto"));
  EXPECT_EQ(count_parameters(atto, "rgb."), 3386760);
  for (const char* v : {"atto", "nano", "tiny"}) {
    DiffNet m(model_preset(v));
    EXPECT_EQ(count_parameters(m, "rgb."), backbone_formula(m->config().dims, m->config().depths)) << v;
  }
  // Neck of base (docs/design.md §2.6): 6 DCT blocks + 6 refine blocks at 256 = 2 x 3,245,568.
  EXPECT_EQ(count_parameters(base, "dct.blocks."), 3245568);
  EXPECT_EQ(count_parameters(base, "decoder.refine."), 3245568);
  EXPECT_EQ(count_parameters(base, "fuse."), (256 + 256) * 256 + 256);
  // disc.s: reduce C_s*D + D, theta D*M*(K^2-1), projection D*M + D.
  EXPECT_EQ(count_parameters(base, "disc.0."), 128 * 256 + 256 + 256 * 2 * 48 + 256 * 2 + 256);
  EXPECT_EQ(count_parameters(base, "cls_head."), (2 * 256 + 3) * 512 + 512 + 512 * 2 + 2);
  // info's per-module table covers every parameter exactly once.
  int64_t sum = 0;
  for (const auto& c : model_costs(base, 768, 768)) sum += c.params;
  EXPECT_EQ(sum, count_parameters(base));
}

TEST(ModelNet, AllAblationsBuildAndRun) {
  torch::NoGradGuard ng;
  Inputs in = make_inputs(1, 64, 64);
  for (int i = 0; i <= 20; ++i) {
    ModelConfig cfg = model_preset("atto");
    const std::string id = "A" + std::to_string(i);
    apply_ablation(cfg, id);
    DiffNet m(cfg);
    m->eval();
    DiffNetOutput out = m->forward(in.rgb, in.dct, in.qt);
    EXPECT_EQ(out.seg_logits.sizes(), at::IntArrayRef({1, 2, 64, 64})) << id;
    EXPECT_EQ(out.cls_logits.sizes(), at::IntArrayRef({1, 2})) << id;
    EXPECT_TRUE(torch::isfinite(out.seg_logits).all().item<bool>()) << id;
    // The config travels through JSON unchanged (weights files carry it).
    EXPECT_EQ(to_json(model_config_from_json(to_json(cfg))), to_json(cfg)) << id;
  }
  ModelConfig a2 = model_preset("atto");
  apply_ablation(a2, "A2");
  EXPECT_EQ(a2.depths[3], 2 + 3);
  EXPECT_EQ(a2.refine_depth, 0);
  ModelConfig a1 = model_preset("base");
  apply_ablation(a1, "A1");
  DiffNet fph(a1);
  EXPECT_GT(count_parameters(fph, "dct.qt_embed."), 0);
  EXPECT_EQ(fph->parts().dct->out_channels(), 256);
}

// diffnet bench --parts reads each module's analytic FLOPs against the time of the traced part that holds
// it: every module of model_costs must map to a part the forward actually marks, for every ablation
// (A19's input filters, A1's FPH, the DCT branch left out) and with the line context.
TEST(ModelNet, EveryCostedModuleIsInATracedPart) {
  torch::NoGradGuard ng;
  Inputs in = make_inputs(1, 64, 64);
  std::vector<std::pair<std::string, ModelConfig>> cases;
  for (int i = 0; i <= 20; ++i) {
    ModelConfig cfg = model_preset("atto");
    apply_ablation(cfg, "A" + std::to_string(i));
    cases.push_back({"A" + std::to_string(i), cfg});
  }
  ModelConfig lined = model_preset("atto");
  lined.line_context = true;
  cases.push_back({"line_context", lined});
  for (const auto& c : cases) {
    DiffNet m(c.second);
    m->eval();
    std::set<std::string> traced;
    m->set_trace([&](const char* part) {
      if (std::string(part) != "start") traced.insert(part);
    });
    (void)m->forward(in.rgb, in.dct, in.qt);
    std::set<std::string> costed;
    for (const auto& mc : model_costs(m, 64, 64)) costed.insert(part_of_module(mc.name));
    EXPECT_EQ(costed, traced) << c.first;
    EXPECT_EQ(traced.count("dct"), c.second.dct_head == "none" ? 0u : 1u) << c.first;
  }
  EXPECT_THROW(part_of_module("decoderx"), Error);
  EXPECT_THROW(part_of_module("rgb.stages.4"), Error);
}

TEST(ModelNet, InputErrors) {
  DiffNet m(model_preset("atto"));
  m->eval();
  torch::NoGradGuard ng;
  auto expect_error = [&](const Inputs& in, const std::string& needle) {
    try {
      m->forward(in.rgb, in.dct, in.qt);
      ADD_FAILURE() << "no error (" << needle << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(make_inputs(1, 48, 64), "multiple of 32");
  expect_error(make_inputs(1, 64, 80), "multiple of 32");
  Inputs bad = make_inputs(1, 64, 64);
  bad.dct[0][3][3] = 21;
  expect_error(bad, "dct values");
  bad = make_inputs(1, 64, 64);
  bad.qt[0][5] = 0;
  expect_error(bad, "qt values");
  bad = make_inputs(1, 64, 64);
  bad.dct = bad.dct.narrow(2, 0, 32);
  expect_error(bad, "dct must be");
  bad = make_inputs(1, 64, 64);
  bad.qt = bad.qt.narrow(1, 0, 63);
  expect_error(bad, "qt must be");
  bad = make_inputs(1, 64, 64);
  bad.rgb = bad.rgb.narrow(1, 0, 1);
  expect_error(bad, "rgb must be");
}

TEST(ModelNet, EveryParameterGetsAGradientAndTheDctPathLearns) {
  Inputs in = make_inputs(2, 64, 64, 6);
  at::Tensor mask = torch::randint(0, 2, {2, 64, 64}, at::kLong);
  at::Tensor label = torch::tensor({0, 1}, at::kLong);
  for (double fuse_init : {0.01, 0.0}) {
    ModelConfig cfg = model_preset("atto");
    EXPECT_EQ(cfg.fuse_dct_init, 0.01);  // the default (docs/model.md)
    cfg.fuse_dct_init = fuse_init;
    torch::manual_seed(5);
    DiffNet m(cfg);
    m->train();
    torch::optim::AdamW opt(m->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
    auto step = [&] {
      opt.zero_grad();
      DiffNetOutput out = m->forward(in.rgb, in.dct, in.qt);
      at::Tensor loss = at::cross_entropy_loss(out.seg_logits, mask) + at::cross_entropy_loss(out.cls_logits, label);
      loss.backward();
    };
    // Smallest max|grad| over the DCT branch's tensors.
    auto dct_min_grad = [&] {
      double mn = 1e30;
      for (const auto& kv : m->named_parameters())
        if (kv.key().rfind("dct.", 0) == 0) mn = std::min(mn, kv.value().grad().abs().max().item<double>());
      return mn;
    };
    step();
    int64_t nonzero = 0, total = 0;
    for (const auto& kv : m->named_parameters()) {
      ASSERT_TRUE(kv.value().grad().defined()) << kv.key() << " has no gradient";
      ++total;
      if (kv.value().grad().abs().max().item<double>() > 0) ++nonzero;
    }
    at::Tensor fuse_grad = m->parts().fuse->weight.grad().view({80, 144}).narrow(1, 80, 64);
    EXPECT_GT(fuse_grad.abs().max().item<double>(), 0.0);
    if (fuse_init > 0) {
      EXPECT_EQ(nonzero, total);  // every tensor, the DCT branch included, learns from step 0
      EXPECT_GT(dct_min_grad(), 0.0);
    } else {
      // [identity | 0] cuts the DCT branch off at step 0; once the fusion's DCT half has moved
      // (one optimizer step) the branch receives gradients.
      EXPECT_EQ(dct_min_grad(), 0.0);
      EXPECT_GT(nonzero, total / 2);
      opt.step();
      step();
      EXPECT_GT(dct_min_grad(), 0.0);
    }
  }
}

TEST(ModelNet, DropPathOnlyInTraining) {
  ModelConfig cfg = model_preset("atto");
  cfg.drop_path_rate = 0.5;
  DiffNet m(cfg);
  Inputs in = make_inputs(2, 64, 64);
  torch::NoGradGuard ng;
  m->eval();
  at::Tensor a = m->forward(in.rgb, in.dct, in.qt).seg_logits;
  at::Tensor b = m->forward(in.rgb, in.dct, in.qt).seg_logits;
  EXPECT_TRUE(a.equal(b));
  m->train();
  torch::manual_seed(1);
  at::Tensor c = m->forward(in.rgb, in.dct, in.qt).seg_logits;
  torch::manual_seed(2);
  at::Tensor d = m->forward(in.rgb, in.dct, in.qt).seg_logits;
  EXPECT_FALSE(c.equal(d));
}

TEST(ModelNet, FusedAndDenseDiscrepancyAgree) {
  DiffNet m(model_preset("atto"));
  m->eval();
  torch::NoGradGuard ng;
  Inputs in = make_inputs(1, 64, 64);
  at::Tensor a = m->forward(in.rgb, in.dct, in.qt).seg_logits;  // default: fused in inference
  m->set_disc_impl("dense");
  at::Tensor b = m->forward(in.rgb, in.dct, in.qt).seg_logits;
  EXPECT_LT(testutil::max_abs_diff(a, b), 1e-4);
  EXPECT_GT(testutil::max_abs_diff(a, b), 0.0);  // really two implementations
  m->set_disc_impl("fused");
  EXPECT_TRUE(m->forward(in.rgb, in.dct, in.qt).seg_logits.equal(a));
  EXPECT_THROW(m->set_disc_impl("magic"), Error);
}

TEST(ModelNet, Bfloat16InferenceIsCloseToFloat32) {
  torch::manual_seed(12);
  DiffNet a(model_preset("atto"));
  DiffNet b(model_preset("atto"));
  load_model_state(b, model_state(a));
  a->eval();
  b->eval();
  b->to(at::kBFloat16);
  torch::NoGradGuard ng;
  Inputs in = make_inputs(1, 64, 64, 13);
  DiffNetOutput oa = a->forward(in.rgb, in.dct, in.qt), ob = b->forward(in.rgb, in.dct, in.qt);
  EXPECT_EQ(ob.seg_logits.scalar_type(), at::kFloat);
  EXPECT_EQ(ob.cls_logits.scalar_type(), at::kFloat);
  const double d = testutil::max_abs_diff(at::softmax(oa.seg_logits, 1), at::softmax(ob.seg_logits, 1));
  EXPECT_LT(d, 0.02);
  EXPECT_GT(d, 0.0);
}
