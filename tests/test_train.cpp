// Tests of the train module: focal loss (hand-computed, float64 loop), LR schedule (formula), AdamW (vs
// torch::optim::AdamW), checkpoints (round trip, corruption), exact resume, the CLI, and a learning
// test: a tiny DiffNet must learn to localise planted JPEG-compressed regions on held-out images.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include <unistd.h>

#include "diffnet/common.h"
#include "diffnet/conv_grad.h"
#include "diffnet/data.h"
#include "diffnet/dct.h"
#include "diffnet/dist.h"
#include "diffnet/image_io.h"
#include "diffnet/safetensors.h"
#include "diffnet/train.h"
#include "testing.h"

namespace diffnet {
namespace {
namespace fs = std::filesystem;
using testutil::temp_dir;

void expect_error_naming(const std::function<void()>& fn, const std::string& name) {
  try {
    fn();
    FAIL() << "expected an error naming " << name;
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(Loss, FocalHandComputed) {
  // Pixel 1: logits (0, 0), class 0, weight 1: p = 1/2 -> (1/2)^2 ln 2.
  // Pixel 2: logits (ln 3, 0), class 1, weight 16: p = 1/4 -> (3/4)^2 ln 4.
  at::Tensor logits = at::tensor({0.0, std::log(3.0), 0.0, 0.0}, at::kFloat).view({1, 2, 2});
  at::Tensor target = at::tensor({0, 1}, at::kLong).view({1, 2});
  double want = (0.25 * std::log(2.0) + 16 * 0.5625 * std::log(4.0)) / 17.0;
  EXPECT_NEAR(focal_loss(logits, target, 2.0, {1.0, 16.0}).item<double>(), want, 1e-6);
  // gamma 0, equal weights: plain cross-entropy mean.
  EXPECT_NEAR(focal_loss(logits, target, 0.0, {1.0, 1.0}).item<double>(), (std::log(2.0) + std::log(4.0)) / 2, 1e-6);
}

TEST(Loss, FocalFloat64LoopAndDiffNetLoss) {
  torch::manual_seed(0);
  at::Tensor logits = at::randn({2, 2, 5, 7}) * 3;
  at::Tensor mask = at::randint(0, 2, {2, 5, 7}, at::kLong);
  mask[1].zero_();  // image 1 pristine
  auto a = logits.accessor<float, 4>();
  auto m = mask.accessor<int64_t, 3>();
  double num = 0, den = 0;
  for (int b = 0; b < 2; ++b)
    for (int y = 0; y < 5; ++y)
      for (int x = 0; x < 7; ++x) {
        double l0 = a[b][0][y][x], l1 = a[b][1][y][x];
        int t = static_cast<int>(m[b][y][x]);
        double lp = (t ? l1 : l0) - std::log(std::exp(l0) + std::exp(l1));
        double w = t ? 16.0 : 1.0;
        num += w * std::pow(1 - std::exp(lp), 2) * -lp;
        den += w;
      }
  EXPECT_NEAR(focal_loss(logits, mask, 2.0, {1.0, 16.0}).item<double>(), num / den, 1e-5);
  // Image loss target = any tampered pixel; total = seg + 0.1 cls.
  DiffNetOutput out{logits, at::tensor({0.3f, -0.2f, 1.0f, 2.0f}).view({2, 2})};
  TrainConfig cfg;
  LossParts lp = diffnet_loss(out, mask.to(at::kByte), cfg);
  auto cls_term = [](double l0, double l1, int t) {
    double lpv = (t ? l1 : l0) - std::log(std::exp(l0) + std::exp(l1));
    return std::pow(1 - std::exp(lpv), 2) * -lpv;
  };
  double cls = (cls_term(0.3, -0.2, 1) + cls_term(1.0, 2.0, 0)) / 2;
  EXPECT_NEAR(lp.cls.item<double>(), cls, 1e-6);
  EXPECT_NEAR(lp.total.item<double>(), num / den + 0.1 * cls, 1e-5);
}

// The top-k terms in float64: for each crop whose mask has (edited) or lacks (!edited) a tampered pixel,
// the mean of -log(1 - p) (false alarm) or -log p (peak) over the top k margins among its untouched-crop
// pixels (all of them) or its tampered ones; summed over those crops, divided by the batch.
double topk_term_float64(const at::Tensor& logits, const at::Tensor& mask, size_t k, bool peak) {
  auto a = logits.accessor<float, 4>();
  auto m = mask.accessor<uint8_t, 3>();
  double sum = 0;
  for (int64_t b = 0; b < logits.size(0); ++b) {
    std::vector<double> v;
    bool edited = false;
    for (int64_t y = 0; y < logits.size(2); ++y)
      for (int64_t x = 0; x < logits.size(3); ++x) {
        edited |= m[b][y][x] != 0;
        if (!peak || m[b][y][x]) v.push_back(static_cast<double>(a[b][1][y][x]) - a[b][0][y][x]);
      }
    if (edited != peak) continue;
    std::sort(v.begin(), v.end(), std::greater<double>());
    const size_t n = std::min(k, v.size());
    double s = 0;
    for (size_t i = 0; i < n; ++i) {
      const double p = 1 / (1 + std::exp(-v[i]));
      s += peak ? -std::log(p) : -std::log(1 - p);
    }
    sum += s / static_cast<double>(n);
  }
  return sum / static_cast<double>(logits.size(0));
}

// A term's value in diffnet_loss's parts and, with its weight, in the total (0 weight: not in it).
void expect_term_in_total(const at::Tensor& logits, const at::Tensor& mask, double frac, double want,
                          double TrainConfig::*weight, at::Tensor LossParts::*part) {
  DiffNetOutput out{logits, at::zeros({logits.size(0), 2})};
  TrainConfig cfg;
  cfg.topk_frac = frac;
  const double base = diffnet_loss(out, mask, cfg).total.item<double>();
  cfg.*weight = 0.5;
  LossParts lp = diffnet_loss(out, mask, cfg);
  EXPECT_NEAR((lp.*part).item<double>(), want, 1e-5);
  EXPECT_NEAR(lp.total.item<double>(), base + 0.5 * want, 1e-5);
}

TEST(Loss, FalseAlarmTermMatchesASortedFloat64Loop) {
  torch::manual_seed(4);
  at::Tensor logits = at::randn({3, 2, 6, 5}) * 3;
  at::Tensor mask = at::zeros({3, 6, 5}, at::kByte);
  mask[1][2][3] = 1;        // crop 1 has an edit: not counted; crops 0 and 2 are untouched
  const double frac = 0.1;  // 30 pixels -> k = 3
  const double want = topk_term_float64(logits, mask, 3, false);
  EXPECT_NEAR(false_alarm_loss(logits, mask, frac).item<double>(), want, 1e-5);
  expect_term_in_total(logits, mask, frac, want, &TrainConfig::fa_weight, &LossParts::fa);
  // Every crop edited: zero, with a gradient of zeros.
  at::Tensor lg = logits.clone().requires_grad_();
  at::Tensor loss = false_alarm_loss(lg, at::ones({3, 6, 5}, at::kByte), frac);
  loss.backward();
  EXPECT_EQ(loss.item<double>(), 0.0);
  EXPECT_EQ(lg.grad().abs().sum().item<double>(), 0.0);
  // The gradient reaches only the top pixels of the untouched crops.
  at::Tensor lg2 = logits.clone().requires_grad_();
  false_alarm_loss(lg2, mask, frac).backward();
  EXPECT_EQ(lg2.grad()[1].ne(0).sum().item<int64_t>(), 0);
  EXPECT_EQ(lg2.grad()[0][1].ne(0).sum().item<int64_t>(), 3);
}

TEST(Loss, PeakTermMatchesASortedFloat64Loop) {
  torch::manual_seed(5);
  at::Tensor logits = at::randn({3, 2, 6, 5}) * 3;
  at::Tensor mask = at::zeros({3, 6, 5}, at::kByte);
  mask[0].slice(0, 1, 4).slice(1, 1, 4).fill_(1);  // 9 tampered pixels: k = 3
  mask[2][5][4] = 1;                                // 1 tampered pixel: k = 1; crop 1 untouched
  const double frac = 0.1;                          // 30 pixels -> k at most 3
  const double want = topk_term_float64(logits, mask, 3, true);
  EXPECT_NEAR(peak_loss(logits, mask, frac).item<double>(), want, 1e-5);
  expect_term_in_total(logits, mask, frac, want, &TrainConfig::peak_weight, &LossParts::peak);
  // No edit anywhere: zero; the gradient reaches only tampered pixels.
  EXPECT_EQ(peak_loss(logits, at::zeros({3, 6, 5}, at::kByte), frac).item<double>(), 0.0);
  at::Tensor lg = logits.clone().requires_grad_();
  peak_loss(lg, mask, frac).backward();
  at::Tensor g = lg.grad().select(1, 1).ne(0);
  EXPECT_EQ(g.logical_and(mask.eq(0)).sum().item<int64_t>(), 0);
  EXPECT_EQ(g.sum().item<int64_t>(), 4);
}

TEST(Schedule, WarmupCosine) {
  TrainConfig c;
  c.lr = 1e-3;
  c.warmup = 10;
  c.steps = 110;
  EXPECT_DOUBLE_EQ(lr_at(c, 0), 1e-4);
  EXPECT_DOUBLE_EQ(lr_at(c, 4), 5e-4);
  EXPECT_DOUBLE_EQ(lr_at(c, 9), 1e-3);
  EXPECT_NEAR(lr_at(c, 10), 1e-3, 1e-15);
  EXPECT_NEAR(lr_at(c, 60), 0.5e-3, 1e-15);                                    // half-way: cos(pi/2) = 0
  EXPECT_NEAR(lr_at(c, 35), 1e-3 * 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-15);  // quarter
  EXPECT_NEAR(lr_at(c, 110), 0.0, 1e-18);
  c.min_lr = 1e-5;
  EXPECT_NEAR(lr_at(c, 60), 1e-5 + (1e-3 - 1e-5) * 0.5, 1e-15);
  c.warmup = 0;
  EXPECT_NEAR(lr_at(c, 0), 1e-3, 1e-15);
}

TEST(Optimizer, AdamWMatchesTorch) {
  torch::manual_seed(1);
  at::Tensor w0 = at::randn({4, 3}), b0 = at::randn({3});
  at::Tensor w1 = w0.clone().requires_grad_(true), b1 = b0.clone().requires_grad_(true);
  at::Tensor w2 = w0.clone().requires_grad_(true), b2 = b0.clone().requires_grad_(true);
  AdamW mine({{"w", w1, 0.01}, {"b", b1, 0.01}}, 0.9, 0.999, 1e-8);
  torch::optim::AdamW ref({w2, b2}, torch::optim::AdamWOptions(0.01).weight_decay(0.01).betas({0.9, 0.999}).eps(1e-8));
  for (int step = 0; step < 6; ++step) {
    at::Tensor x = at::randn({5, 4});
    ((x.matmul(w1) + b1).square().sum()).backward();
    ((x.matmul(w2) + b2).square().sum()).backward();
    mine.step(0.01);
    ref.step();
    mine.zero_grad();
    ref.zero_grad();
  }
  EXPECT_LE(testutil::max_abs_diff(w1, w2), 1e-6);
  EXPECT_LE(testutil::max_abs_diff(b1, b2), 1e-6);
  auto st = mine.state();
  EXPECT_EQ(st.at("w.step").item<int64_t>(), 6);
  // A parameter without a gradient is skipped (its step count does not move).
  at::Tensor unused = at::ones({2}).requires_grad_(true);
  AdamW o2({{"u", unused, 0.5}}, 0.9, 0.999, 1e-8);
  o2.step(0.1);
  EXPECT_TRUE(unused.equal(at::ones({2})));
  EXPECT_EQ(o2.state().at("u.step").item<int64_t>(), 0);
}

// Parameters with different weight decay, lr scale and step counts (one gets a gradient every other step)
// are grouped inside AdamW::step; each must follow the per-parameter rule, computed here in float64.
TEST(Optimizer, AdamWGroupsFollowTheFloat64Rule) {
  torch::manual_seed(2);
  const double b1 = 0.9, b2 = 0.99, eps = 1e-8, lr = 0.05;
  const double wds[4] = {0.0, 0.1, 0.1, 0.1}, scales[4] = {1.0, 1.0, 1.0, 3.0};
  std::vector<at::Tensor> live, ref, m, v;
  std::vector<int64_t> t(4, 0);
  std::vector<AdamW::Param> params;
  for (int i = 0; i < 4; ++i) {
    at::Tensor p0 = at::randn({3 + i});
    live.push_back(p0.clone().requires_grad_(true));
    ref.push_back(p0.to(at::kDouble));
    m.push_back(at::zeros({3 + i}, at::kDouble));
    v.push_back(at::zeros({3 + i}, at::kDouble));
    params.push_back({"p" + std::to_string(i), live.back(), wds[i], scales[i]});
  }
  AdamW opt(params, b1, b2, eps);
  for (int step = 0; step < 5; ++step) {
    for (int i = 0; i < 4; ++i) {
      const double lr_i = lr * scales[i];
      if (i == 2 && step % 2 == 1) continue;  // no gradient: skipped, its step count does not move
      at::Tensor g = at::randn({3 + i});
      live[i].mutable_grad() = g.clone();
      const double tt = static_cast<double>(++t[i]);
      at::Tensor gd = g.to(at::kDouble);
      ref[i] = ref[i] * (1 - lr_i * wds[i]);
      m[i] = b1 * m[i] + (1 - b1) * gd;
      v[i] = b2 * v[i] + (1 - b2) * gd * gd;
      const double bc1 = 1 - std::pow(b1, tt), bc2 = 1 - std::pow(b2, tt);
      ref[i] = ref[i] - lr_i / bc1 * m[i] / (v[i].sqrt() / std::sqrt(bc2) + eps);
    }
    opt.step(lr);
    opt.zero_grad();
  }
  for (int i = 0; i < 4; ++i) EXPECT_LE(testutil::max_abs_diff(live[i], ref[i]), 1e-5) << i;
  EXPECT_EQ(opt.state().at("p2.step").item<int64_t>(), 3);
  EXPECT_EQ(opt.state().at("p0.step").item<int64_t>(), 5);
}

// A very small DiffNet for CPU tests.
ModelConfig tiny_model() {
  ModelConfig m = model_preset("atto");
  m.preset = "test-tiny";
  m.dims = {16, 24, 32, 48};
  m.depths = {1, 1, 1, 1};
  m.dct_depth = 1;
  m.disc_dim = 16;
  m.refine_depth = 1;
  return m;
}

// line_lr_scale reaches the line context's parameters, and only them.
TEST(Optimizer, LineLrScaleOnlyOnTheLineContext) {
  ModelConfig m = tiny_model();
  m.line_context = true;
  DiffNet net(m);
  TrainConfig tc;
  tc.line_lr_scale = 10.0;
  int line = 0, other = 0;
  for (const auto& p : optimizer_params(net, tc)) {
    const bool is_line = p.name.rfind("decoder.line.", 0) == 0;
    EXPECT_EQ(p.lr_scale, is_line ? 10.0 : 1.0) << p.name;
    (is_line ? line : other) += 1;
  }
  EXPECT_EQ(line, 6);  // attn, mix, out: weight and bias each
  EXPECT_GT(other, 0);
  tc.line_lr_scale = 0;
  tc.data = {"x"};
  EXPECT_THROW(validate_train_config(tc), Error);
}

// The precedence of a run's configuration, each step against values written out here.
TEST(TrainConfigResolve, Precedence) {
  TrainConfigSources none;
  ResolvedTrainConfig r = resolve_train_config(none);
  EXPECT_EQ(r.model.preset, "atto");
  EXPECT_EQ(r.model.dims, (std::vector<int64_t>{40, 80, 160, 320}));
  EXPECT_EQ(r.train.size, 512);
  EXPECT_DOUBLE_EQ(r.train.lr, 1e-4);

  // preset: given > file > atto; the file's model fields over the preset; ablations after them, the
  // given ones after the file's; disc_impl and drop_path_rate last.
  TrainConfigSources s;
  s.file = nlohmann::json::parse(R"({"preset": "femto", "model": {"kernel_size": 9, "num_filters": 4},
                                     "ablations": ["A13"],
                                     "train": {"lr": 0.002, "steps": 7, "augment": {"prob_disable": 0.5}}})");
  r = resolve_train_config(s);
  EXPECT_EQ(r.model.preset, "femto");
  EXPECT_EQ(r.model.dims, (std::vector<int64_t>{48, 96, 192, 384}));
  EXPECT_EQ(r.model.num_filters, 4);
  EXPECT_EQ(r.model.kernel_size, 3);  // A13 after the file's 9
  EXPECT_EQ(r.model.disc_impl, "fused");
  EXPECT_DOUBLE_EQ(r.train.lr, 0.002);
  EXPECT_EQ(r.train.steps, 7);
  EXPECT_DOUBLE_EQ(r.train.augment.prob_disable, 0.5);
  s.preset = "pico";
  s.ablations = {"A12"};
  s.disc_impl = "dense";
  s.drop_path_rate = 0.3;
  s.train = nlohmann::json::parse(R"({"steps": 9, "augment": {"enabled": false}})");
  r = resolve_train_config(s);
  EXPECT_EQ(r.model.preset, "pico");
  EXPECT_EQ(r.model.dims, (std::vector<int64_t>{64, 128, 256, 512}));
  EXPECT_EQ(r.model.kernel_size, 5);  // the given A12 after the file's A13
  EXPECT_EQ(r.model.disc_impl, "dense");
  EXPECT_DOUBLE_EQ(r.model.drop_path_rate, 0.3);
  EXPECT_DOUBLE_EQ(r.train.lr, 0.002);  // the file's, not given
  EXPECT_EQ(r.train.steps, 9);
  EXPECT_FALSE(r.train.augment.enabled);
  EXPECT_DOUBLE_EQ(r.train.augment.prob_disable, 0.5);  // a partial augment object keeps the file's
  // An ablation without zero-sum filters records the implementation it trains with.
  TrainConfigSources srm;
  srm.ablations = {"A14"};
  EXPECT_EQ(resolve_train_config(srm).model.disc_impl, "dense");

  // --init with no preset or model named: the weights' own model; a named preset wins over it.
  const std::string dir = testutil::temp_dir("resolve");
  DiffNet tiny(tiny_model());
  save_model(tiny, dir + "/tiny.safetensors");
  TrainConfigSources init;
  init.train = {{"init", dir + "/tiny.safetensors"}};
  r = resolve_train_config(init);
  EXPECT_EQ(r.model.preset, "test-tiny");
  EXPECT_EQ(r.model.dims, (std::vector<int64_t>{16, 24, 32, 48}));
  EXPECT_EQ(r.train.init, dir + "/tiny.safetensors");
  // The file's model fields apply to the weights' model (a fine-tune that switches a part on).
  init.file = nlohmann::json::parse(R"({"model": {"line_context": true}})");
  r = resolve_train_config(init);
  EXPECT_EQ(r.model.dims, (std::vector<int64_t>{16, 24, 32, 48}));
  EXPECT_TRUE(r.model.line_context);
  init.preset = "atto";
  EXPECT_EQ(resolve_train_config(init).model.dims, (std::vector<int64_t>{40, 80, 160, 320}));

  // Errors name the file and the field.
  TrainConfigSources bad;
  bad.file_name = "run.json";
  bad.file = nlohmann::json::parse(R"({"optimizer": {}})");
  expect_error_naming([&] { resolve_train_config(bad); }, "run.json: unknown top-level field 'optimizer'");
  bad.file = nlohmann::json::parse(R"({"train": {"learning_rate": 1}})");
  expect_error_naming([&] { resolve_train_config(bad); }, "unknown field 'learning_rate'");
  bad.file = nlohmann::json::object();
  bad.ablations = {"A99"};
  expect_error_naming([&] { resolve_train_config(bad); }, "unknown ablation 'A99'");
}

// Noisy document-like page (light paper noise, dark strokes); the noise carries the JPEG traces.
at::Tensor make_page(int64_t h, int64_t w, Rng& rng) {
  at::Tensor img = at::empty({h, w, 3}, at::kByte);
  uint8_t* p = img.data_ptr<uint8_t>();
  int base = static_cast<int>(rng.randint(200, 235));
  for (int64_t i = 0; i < h * w; ++i) {
    int v = base + static_cast<int>(rng.randint(0, 20));
    for (int c = 0; c < 3; ++c) p[i * 3 + c] = static_cast<uint8_t>(v + rng.randint(-3, 3));
  }
  for (int bar = 0; bar < h / 8; ++bar) {
    int64_t y = rng.randint(0, h - 3), x = rng.randint(0, w - 10), len = rng.randint(6, w / 2);
    for (int64_t yy = y; yy < std::min(h, y + 2); ++yy)
      for (int64_t xx = x; xx < std::min(w, x + len); ++xx)
        for (int c = 0; c < 3; ++c) p[(yy * w + xx) * 3 + c] = static_cast<uint8_t>(rng.randint(20, 60));
  }
  return img;
}

// The planted tamper: the page is a quality-95 JPEG except a rectangle pasted from a quality-35
// encoding of the same page (no visible content change; the traces differ). Stored as PNG.
void make_tampered(int64_t size, Rng& rng, at::Tensor& rgb, at::Tensor& mask, bool tampered) {
  at::Tensor page = make_page(size, size, rng);
  at::Tensor hi = decode_image_bytes(encode_jpeg(page, 95), "hi");
  at::Tensor lo = decode_image_bytes(encode_jpeg(page, 35), "lo");
  rgb = hi.clone();
  mask = at::zeros({size, size}, at::kByte);
  if (!tampered) return;
  int64_t h = rng.randint(size / 5, size / 2), w = rng.randint(size / 5, size / 2);
  int64_t y = rng.randint(0, size - h), x = rng.randint(0, size - w);
  rgb.slice(0, y, y + h).slice(1, x, x + w).copy_(lo.slice(0, y, y + h).slice(1, x, x + w));
  mask.slice(0, y, y + h).slice(1, x, x + w).fill_(1);
}

std::string make_dataset(const std::string& dir, int n, int64_t size, uint64_t seed) {
  fs::create_directories(dir + "/images");
  fs::create_directories(dir + "/masks");
  Rng rng(seed);
  for (int i = 0; i < n; ++i) {
    at::Tensor rgb, mask;
    make_tampered(size, rng, rgb, mask, i % 6 != 5);
    char name[32];
    std::snprintf(name, sizeof name, "doc%03d", i);
    write_png(dir + "/images/" + name + ".png", rgb);
    if (mask.any().item<bool>()) write_png(dir + "/masks/" + name + ".png", mask * 255);
  }
  return dir;
}

TrainConfig small_train(const std::string& data) {
  TrainConfig t;
  t.data = {data};
  t.size = 64;
  t.batch = 2;
  t.accum = 2;
  t.steps = 6;
  t.warmup = 2;
  t.lr = 1e-3;
  t.workers = 2;
  t.checkpoint_every = 3;
  t.seed = 7;
  t.augment.p_spatial = t.augment.p_visual = 0.5;  // exercise the augmentation paths
  return t;
}

std::map<std::string, at::Tensor> weights_of(const std::string& path) { return load_safetensors(path).tensors; }

TEST(Checkpoint, ResumeIsExactAndCorruptionIsRejected) {
  std::string data = make_dataset(temp_dir("resume-data"), 8, 96, 1);
  ModelConfig m = tiny_model();
  m.drop_path_rate = 0.2;  // drop path draws from the CPU generator: restored by the checkpoint
  TrainConfig t = small_train(data);
  TrainOptions full;
  full.out = temp_dir("run-full");
  full.quiet = true;
  TrainSummary a = run_training(t, m, full);
  EXPECT_EQ(a.end_step, 6);
  ASSERT_FALSE(a.model_path.empty());

  TrainOptions part = full;
  part.out = temp_dir("run-part");
  part.stop_after = 4;
  part.export_fp16 = true;  // asked for at the start only: the resumed run below still writes it
  TrainSummary b1 = run_training(t, m, part);
  EXPECT_EQ(b1.end_step, 4);
  EXPECT_TRUE(b1.model_path.empty());
  EXPECT_TRUE(fs::exists(part.out + "/checkpoints/last.safetensors"));
  EXPECT_FALSE(fs::exists(part.out + "/model.safetensors"));
  // A second fresh start in the same directory is refused.
  expect_error_naming([&] { run_training(t, m, part); }, "--resume");
  part.stop_after = 0;
  part.resume = true;
  part.export_fp16 = false;
  part.workers = 1;  // the loader thread count does not change the stream
  // The checkpoint names the convolutions' weight gradient its run used; the resumed run takes it back
  // whatever this process would use.
  const std::string wgrad = read_checkpoint(part.out + "/checkpoints/last.safetensors").state.conv_weight_grad;
  ASSERT_TRUE(wgrad == "ours" || wgrad == "aten") << wgrad;
  diffnet::ops::set_conv_weight_grad(wgrad == "ours" ? "aten" : "ours");
  TrainSummary b2 = run_training(t, m, part);
  EXPECT_EQ(diffnet::ops::conv_weight_grad(), wgrad);
  EXPECT_EQ(b2.start_step, 4);
  EXPECT_EQ(b2.end_step, 6);
  auto wa = weights_of(a.model_path), wb = weights_of(b2.model_path);
  ASSERT_EQ(wa.size(), wb.size());
  double worst = 0;
  for (const auto& [name, ta] : wa) worst = std::max(worst, testutil::max_abs_diff(ta, wb.at(name)));
  EXPECT_LE(worst, 1e-6);
  // The fp16 copy: the final weights rounded to half; none for the run started without it.
  EXPECT_FALSE(fs::exists(full.out + "/model-fp16.safetensors"));
  ASSERT_TRUE(fs::exists(part.out + "/model-fp16.safetensors"));
  auto wh = weights_of(part.out + "/model-fp16.safetensors");
  ASSERT_EQ(wh.size(), wb.size());
  for (const auto& [name, tb] : wb) {
    if (tb.scalar_type() != at::kFloat) continue;
    EXPECT_EQ(wh.at(name).scalar_type(), at::kHalf) << name;
    EXPECT_TRUE(at::equal(wh.at(name), tb.to(at::kHalf))) << name;
  }
  // Same per-step losses in both logs.
  auto losses = [](const std::string& log) {
    std::vector<double> v;
    std::ifstream in(log);
    std::string line;
    while (std::getline(in, line)) v.push_back(nlohmann::json::parse(line).at("loss").get<double>());
    return v;
  };
  auto la = losses(full.out + "/log.jsonl"), lb = losses(part.out + "/log.jsonl");
  ASSERT_EQ(la.size(), 6u);
  ASSERT_EQ(lb.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(la[i], lb[i], 1e-6) << "step " << i + 1;
  // The saved config describes both the model and the training.
  auto cfg = nlohmann::json::parse(std::ifstream(full.out + "/config.json"));
  EXPECT_EQ(cfg.at("model").at("dims"), nlohmann::json({16, 24, 32, 48}));
  EXPECT_EQ(cfg.at("train").at("steps"), 6);
  // The final weights load with load_model.
  DiffNet loaded = load_model(a.model_path);
  EXPECT_EQ(loaded->config().dims, m.dims);

  // Checkpoint round trip and corruption.
  std::string ck = full.out + "/checkpoints/last.safetensors";
  CheckpointData data_ck = read_checkpoint(ck);
  EXPECT_EQ(data_ck.state.step, 6);
  EXPECT_EQ(data_ck.state.data_position, 6 * 2 * 2);
  auto bytes = read_file(ck);
  auto flipped = bytes;
  flipped[flipped.size() - 100] ^= 0x10;  // inside the tensor data: structure still valid
  std::string bad = temp_dir("bad") + "/flipped.safetensors";
  write_file_atomic(bad, flipped);
  expect_error_naming([&] { read_checkpoint(bad); }, "checksum");
  auto truncated = std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(bytes.size() / 2));
  write_file_atomic(bad, truncated);
  expect_error_naming([&] { read_checkpoint(bad); }, bad);
  expect_error_naming([&] { read_checkpoint(a.model_path); }, "not a diffnet checkpoint");
  // Resuming from a corrupt last checkpoint names it.
  write_file_atomic(part.out + "/checkpoints/last.safetensors", flipped);
  expect_error_naming([&] { run_training(t, m, part); }, "last.safetensors");
  // No temporary files are left behind.
  for (const auto& e : fs::directory_iterator(full.out + "/checkpoints"))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

// Runs that are compared bit for bit across processes must not each measure their own Linear backend
// (model.h) nor convolution weight gradient (conv_grad.h): where the two paths are close in time, two
// processes can pick differently, and the paths differ in the last bits. Pins both for the scope (as the
// python and install tests pin the Linear backend in CMake).
struct PinLinearBackend {
  PinLinearBackend() {
    setenv("DIFFNET_LINEAR", "blas", 1);
    setenv("DIFFNET_CONV_WGRAD", "ours", 1);
  }
  ~PinLinearBackend() {
    unsetenv("DIFFNET_LINEAR");
    unsetenv("DIFFNET_CONV_WGRAD");
  }
};

TEST(Cli, ConfigFileFlagsAndErrors) {
  std::string data = make_dataset(temp_dir("cli-data"), 4, 64, 2);
  std::string dir = temp_dir("cli");
  nlohmann::json cfg = {{"preset", "atto"},
                        {"model", {{"dims", {16, 24, 32, 48}}, {"depths", {1, 1, 1, 1}}, {"dct_depth", 1},
                                   {"disc_dim", 16}, {"refine_depth", 1}}},
                        {"train", {{"size", 64}, {"batch", 2}, {"steps", 2}, {"warmup", 1}, {"lr", 5e-4}}}};
  std::ofstream(dir + "/cfg.json") << cfg.dump();
  auto r = testutil::run_cli("train --config '" + dir + "/cfg.json' --data '" + data + "' --out '" + dir +
                             "/run' --steps 3 --workers 1 --export-fp16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("done: steps 0-3"), std::string::npos) << r.err;
  for (const char* f : {"config.json", "log.jsonl", "checkpoints/last.safetensors", "model.safetensors",
                        "model-fp16.safetensors"})
    EXPECT_TRUE(fs::exists(dir + "/run/" + f)) << f;
  auto saved = nlohmann::json::parse(std::ifstream(dir + "/run/config.json"));
  EXPECT_EQ(saved.at("train").at("steps"), 3);    // flag overrides the file
  EXPECT_EQ(saved.at("train").at("batch"), 2);    // file overrides the default
  EXPECT_EQ(saved.at("model").at("disc_dim"), 16);
  std::map<std::string, std::string> meta;
  DiffNet fp16 = load_model(dir + "/run/model-fp16.safetensors", &meta);
  EXPECT_EQ(fp16->config().disc_dim, 16);
  EXPECT_EQ(meta["train_size"], "64");  // predict's default window
  EXPECT_EQ(meta["train_steps"], "3");
  EXPECT_EQ(nlohmann::json::parse(meta["train_config"]).at("lr"), 5e-4);

  // Fine-tuning from those weights: the model config comes from the file.
  const PinLinearBackend pin;  // the two fine-tuning runs below are compared bit for bit
  r = testutil::run_cli("train --data '" + data + "' --out '" + dir + "/ft' --init '" + dir +
                        "/run/model.safetensors' --size 64 --batch 2 --steps 1 --workers 0 --prob-disable 0.5 -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ft = nlohmann::json::parse(std::ifstream(dir + "/ft/config.json"));
  EXPECT_EQ(ft.at("model").at("disc_dim"), 16);
  EXPECT_EQ(ft.at("train").at("augment").at("prob_disable"), 0.5);
  // ... or from the run's last checkpoint (a run stopped early): the same start, so the same weights.
  r = testutil::run_cli("train --data '" + data + "' --out '" + dir + "/ft-ck' --init '" + dir +
                        "/run/checkpoints/last.safetensors' --size 64 --batch 2 --steps 1 --workers 0 --prob-disable 0.5 -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir + "/ft-ck/config.json")).at("model"), ft.at("model"));
  const SafeTensors a = load_safetensors(dir + "/ft/model.safetensors"), b = load_safetensors(dir + "/ft-ck/model.safetensors");
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& kv : a.tensors) EXPECT_TRUE(kv.second.equal(b.tensors.at(kv.first))) << kv.first;
  // predict/eval load a checkpoint's model too: the same weights as the run's exported model.
  std::map<std::string, std::string> ck_meta;
  DiffNet from_ck = load_model(dir + "/run/checkpoints/last.safetensors", &ck_meta);
  EXPECT_EQ(ck_meta["train_size"], "64");  // predict's default window, from the run's config
  DiffNet exported = load_model(dir + "/run/model.safetensors");
  EXPECT_EQ(to_json(from_ck->config()), to_json(exported->config()));
  const auto sa = model_state(from_ck), sb = model_state(exported);
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& kv : sa) EXPECT_TRUE(kv.second.equal(sb.at(kv.first))) << kv.first;

  // A diverging run skips non-finite steps, then stops with a clear message after 5 in a row.
  r = testutil::run_cli("train --config '" + dir + "/cfg.json' --data '" + data + "' --out '" + dir +
                        "/nan' --lr 1e30 --warmup 0 --steps 30 --workers 1 -q");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not finite for 5 steps in a row"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("update skipped"), std::string::npos) << r.err;

  r = testutil::run_cli("train --data '" + data + "' --out '" + dir + "/r2' --size 40");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("size must be a positive multiple of 32"), std::string::npos) << r.err;
  r = testutil::run_cli("train --data '" + dir + "/missing' --out '" + dir + "/r3' --steps 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(dir + "/missing"), std::string::npos) << r.err;
  std::ofstream(dir + "/typo.json") << R"({"train": {"step": 3}})";
  r = testutil::run_cli("train --config '" + dir + "/typo.json' --data '" + data + "' --out '" + dir + "/r4'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown field 'step'"), std::string::npos) << r.err;
  r = testutil::run_cli("train --out '" + dir + "/r5' --resume");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no checkpoint to resume from"), std::string::npos) << r.err;
}

// Pixel F1 with TP/FP/FN summed over all images.
double pixel_f1(const std::vector<at::Tensor>& pred, const std::vector<at::Tensor>& gt) {
  double tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < pred.size(); ++i) {
    auto p = pred[i].contiguous(), g = gt[i].contiguous();
    const uint8_t* pp = p.data_ptr<uint8_t>();
    const uint8_t* gp = g.data_ptr<uint8_t>();
    for (int64_t k = 0; k < p.numel(); ++k) {
      tp += pp[k] && gp[k];
      fp += pp[k] && !gp[k];
      fn += !pp[k] && gp[k];
    }
  }
  return 2 * tp / std::max(1.0, 2 * tp + fp + fn);
}

TEST(Cli, BenchDataAndMissingOut) {
  std::string data = make_dataset(temp_dir("bench-data"), 3, 64, 5);
  // --bench-data builds samples on one thread and reports their cost; it trains nothing.
  auto r = testutil::run_cli("train --data '" + data + "' --size 64 --bench-data 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("R=64  4 samples: decode "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" JPEG passes/sample"), std::string::npos) << r.out;
  // Without --bench-data (or --print-config) a run directory is required.
  r = testutil::run_cli("train --data '" + data + "' --size 64 --steps 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--out RUN_DIR is required"), std::string::npos) << r.err;
}

TEST(Learning, TinyModelLocalisesPlantedCompression) {
  const double t0 = now_seconds();
  std::string data = make_dataset(temp_dir("learn-data"), 48, 96, 11);
  TrainConfig t;
  t.data = {data};
  t.size = 64;
  t.batch = 8;
  t.steps = 150;
  t.warmup = 10;
  t.lr = 2e-3;
  t.pos_weight = 2;  // masks cover ~10-25% of the crops
  t.workers = 1;
  t.checkpoint_every = 1000;
  t.seed = 3;
  t.augment.enabled = false;  // PNG sources: DCT from pixels with the all-ones table
  TrainOptions o;
  o.out = temp_dir("learn-run");
  o.quiet = true;
  TrainSummary s = run_training(t, tiny_model(), o);
  std::fprintf(stderr, "learning test: %lld steps, %.1f img/s, data wait %.1f%%, last loss %.4f\n",
               static_cast<long long>(s.end_step), s.images_per_second, 100 * s.data_wait_share, s.last_loss);

  // Held-out images of the same kind (another seed), whole 96x96 pages.
  DiffNet model = load_model(s.model_path);
  model->eval();
  torch::NoGradGuard no_grad;
  Rng rng(999);
  std::vector<at::Tensor> preds, gts, all_pos;
  for (int i = 0; i < 16; ++i) {
    at::Tensor rgb, mask;
    make_tampered(96, rng, rgb, mask, i % 4 != 3);
    at::Tensor dct = pixel_dct(rgb, ones_table()).unsqueeze(0);
    auto out = model->forward(normalize_rgb(rgb.unsqueeze(0)), dct, ones_table().unsqueeze(0));
    at::Tensor prob = at::softmax(out.seg_logits, 1)[0][1];
    preds.push_back(prob.gt(0.5).to(at::kByte));
    gts.push_back(mask);
    all_pos.push_back(at::ones_like(mask));
  }
  double f1 = pixel_f1(preds, gts);
  // The best constant predictor: "all tampered" (all pristine has F1 = 0).
  double const_f1 = pixel_f1(all_pos, gts);
  std::fprintf(stderr, "learning test: held-out pixel F1 %.3f (best constant %.3f), %.0f s\n", f1, const_f1,
               now_seconds() - t0);
  EXPECT_GE(f1, 0.6);
  EXPECT_GE(f1, const_f1 + 0.3);
}


// ---- Data parallelism (c10d) -------------------------------------------------------------------------

TEST(Dist, EnvironmentOfTorchrunAndSlurm) {
  const char* vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                        "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"};
  for (const char* v : vars) unsetenv(v);
  DistEnv e = read_dist_env();
  EXPECT_FALSE(e.distributed());
  EXPECT_EQ(e.world, 1);
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "4", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("MASTER_ADDR", "node7", 1);
  setenv("MASTER_PORT", "29612", 1);
  setenv("SLURM_PROCID", "0", 1);  // torchrun's variables win
  setenv("SLURM_NTASKS", "2", 1);
  e = read_dist_env();
  EXPECT_TRUE(e.distributed());
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "node7");
  EXPECT_EQ(e.master_port, 29612);
  setenv("RANK", "4", 1);  // rank outside the world
  expect_error_naming([] { read_dist_env(); }, "RANK");
  setenv("RANK", "x", 1);
  expect_error_naming([] { read_dist_env(); }, "RANK");
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  unsetenv("LOCAL_RANK");
  setenv("SLURM_PROCID", "1", 1);
  setenv("SLURM_LOCALID", "0", 1);
  e = read_dist_env();
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world, 2);
  unsetenv("MASTER_ADDR");
  expect_error_naming([] { read_dist_env(); }, "MASTER_ADDR");
  setenv("SLURM_NTASKS", "1", 1);  // one task: an ordinary run
  EXPECT_FALSE(read_dist_env().distributed());
  for (const char* v : vars) unsetenv(v);
}

TEST(Dist, RanksShareTheSampleSequenceOfOneProcess) {
  std::string data = make_dataset(temp_dir("dist-loader"), 10, 64, 21);
  auto ids_of = [&](int rank, int world, int64_t batch, int64_t start, int workers, int batches) {
    LoaderConfig c;
    c.size = 32;
    c.batch = batch;
    c.seed = 5;
    c.workers = workers;
    c.rank = rank;
    c.world = world;
    c.quiet = true;
    DataLoader l({open_source(data)}, c, start);
    std::vector<std::pair<int64_t, at::Tensor>> out;  // (global index, rgb) per sample
    for (int b = 0; b < batches; ++b) {
      Batch x = l.next_batch();
      for (int64_t i = 0; i < batch; ++i) out.emplace_back(x.first_index + i, x.rgb[i]);
    }
    EXPECT_EQ(l.position(), start + batches * batch * world);
    return out;
  };
  for (int64_t start : {0, 6}) {
    // One process, batch 6 = three ranks of batch 2: rank r's batch k is samples [start + (3k + r) * 2, +2).
    auto one = ids_of(0, 1, 6, start, 2, 3);
    std::vector<std::vector<std::pair<int64_t, at::Tensor>>> ranks;
    for (int r = 0; r < 3; ++r) ranks.push_back(ids_of(r, 3, 2, start, r == 1 ? 0 : 2, 3));
    for (int k = 0; k < 3; ++k)
      for (int r = 0; r < 3; ++r)
        for (int i = 0; i < 2; ++i) {
          const auto& [idx, rgb] = ranks[static_cast<size_t>(r)][static_cast<size_t>(k * 2 + i)];
          EXPECT_EQ(idx, start + (3 * k + r) * 2 + i);
          const auto& [idx1, rgb1] = one[static_cast<size_t>(k * 6 + r * 2 + i)];
          ASSERT_EQ(idx, idx1);
          EXPECT_TRUE(at::equal(rgb, rgb1)) << "sample " << idx;
        }
  }
}

TEST(Dist, SharedNormaliserSplitsTheLossExactly) {
  torch::manual_seed(3);
  at::Tensor logits = at::randn({4, 2, 6, 5}, at::kDouble) * 2;
  at::Tensor mask = at::randint(0, 2, {4, 6, 5}, at::kByte);
  mask[2].zero_();
  TrainConfig cfg;
  cfg.pos_weight = 4;
  // Denominator by hand: pristine pixels count 1, tampered ones 4.
  int64_t tampered = 0;
  auto m = mask.accessor<uint8_t, 3>();
  for (int b = 0; b < 4; ++b)
    for (int y = 0; y < 6; ++y)
      for (int x = 0; x < 5; ++x) tampered += m[b][y][x] != 0;
  const double w = seg_weight_sum(mask, 4.0);
  EXPECT_DOUBLE_EQ(w, 120.0 + 3.0 * static_cast<double>(tampered));
  at::Tensor cls = at::randn({4, 2}, at::kDouble);
  LossParts whole = diffnet_loss({logits, cls}, mask, cfg);
  // Two halves (two ranks or two micro-batches) with the shared normaliser w / 2, averaged.
  double avg = 0;
  for (int h = 0; h < 2; ++h) {
    auto sl = [&](const at::Tensor& t) { return t.slice(0, 2 * h, 2 * h + 2); };
    avg += 0.5 * diffnet_loss({sl(logits), sl(cls)}, sl(mask), cfg, w / 2).total.item<double>();
  }
  EXPECT_NEAR(avg, whole.total.item<double>(), 1e-6);
  // Each half normalised by itself (the old accumulation rule) is not the same loss here.
  double own = 0;
  for (int h = 0; h < 2; ++h) {
    auto sl = [&](const at::Tensor& t) { return t.slice(0, 2 * h, 2 * h + 2); };
    own += 0.5 * diffnet_loss({sl(logits), sl(cls)}, sl(mask), cfg).total.item<double>();
  }
  EXPECT_GT(std::abs(own - whole.total.item<double>()), 1e-4);
}

// A tiny model's config file for the CLI runs below.
std::string tiny_config(const std::string& dir) {
  nlohmann::json cfg = {{"model", to_json(tiny_model())}};
  std::ofstream(dir + "/tiny.json") << cfg.dump();
  return dir + "/tiny.json";
}

std::vector<nlohmann::json> log_lines(const std::string& path) {
  std::vector<nlohmann::json> v;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) v.push_back(nlohmann::json::parse(line));
  return v;
}

double weights_diff(const std::string& a, const std::string& b) {
  auto wa = weights_of(a), wb = weights_of(b);
  EXPECT_EQ(wa.size(), wb.size());
  double worst = 0;
  for (const auto& [name, ta] : wa) worst = std::max(worst, testutil::max_abs_diff(ta, wb.at(name)));
  return worst;
}

TEST(Dist, TwoProcessesTrainLikeOneWithTwiceTheBatch) {
  if (!diffnet::dist_backend_available("gloo"))
    GTEST_SKIP() << "this LibTorch has no c10d Gloo process group (make's builds require it)";
  const PinLinearBackend pin;  // separate runs are compared bit for bit below
  std::string data = make_dataset(temp_dir("dist-data"), 12, 96, 31);
  std::string dir = temp_dir("dist");
  const std::string common = "train --config '" + tiny_config(dir) + "' --data '" + data +
                             "' --size 64 --steps 4 --warmup 1 --lr 2e-3 --seed 9 --workers 1 --no-validate "
                             "--checkpoint-every 2 --drop-path 0 ";
  auto one = testutil::run_cli("-t 1 " + common + "--batch 4 --out '" + dir + "/one'");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  auto two = testutil::run_cli("-t 1 " + common + "--batch 2 --nproc 2 --out '" + dir + "/two'");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.err.find("[rank 0] world: 2 processes (gloo), micro-batch 2 x 1 accumulation per rank: global batch 4"),
            std::string::npos) << two.err;
  EXPECT_NE(two.err.find("launch: rank 1 pid"), std::string::npos);
  // Same gradient on the same samples: step 1's loss and gradient norm (before any update differs).
  auto l1 = log_lines(dir + "/one/log.jsonl"), l2 = log_lines(dir + "/two/log.jsonl");
  ASSERT_EQ(l1.size(), 4u);
  ASSERT_EQ(l2.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(l2[i].at("loss").get<double>(), l1[i].at("loss").get<double>(), 1e-5 * l1[i].at("loss").get<double>())
        << "step " << i + 1;
    EXPECT_NEAR(l2[i].at("grad_norm").get<double>(), l1[i].at("grad_norm").get<double>(),
                1e-4 * l1[i].at("grad_norm").get<double>()) << "step " << i + 1;
  }
  // Same weights after 4 AdamW steps (float tolerance), far from a run that saw only rank 0's share.
  const double d = weights_diff(dir + "/one/model.safetensors", dir + "/two/model.safetensors");
  auto half = testutil::run_cli("-t 1 " + common + "--batch 2 --out '" + dir + "/half'");
  ASSERT_EQ(half.exit_code, 0) << half.err;
  const double d_half = weights_diff(dir + "/one/model.safetensors", dir + "/half/model.safetensors");
  std::fprintf(stderr, "max |dw|: 2 x batch 2 vs 1 x batch 4: %.3g; 1 x batch 2 vs 1 x batch 4: %.3g\n", d, d_half);
  EXPECT_LE(d, 2e-4);
  EXPECT_GE(d_half, 50 * d);
  // Rank 0 alone wrote the run: one log, one checkpoint, the final weights.
  auto ck = read_checkpoint(dir + "/two/checkpoints/last.safetensors");
  EXPECT_EQ(ck.state.step, 4);
  EXPECT_EQ(ck.state.data_position, 4 * 4);
  EXPECT_EQ(ck.state.world, 2);

  // Stopped after 2 steps and resumed with the same world: the uninterrupted run's weights.
  auto p1 = testutil::run_cli("-t 1 " + common + "--batch 2 --nproc 2 --stop-after 2 --out '" + dir + "/part'");
  ASSERT_EQ(p1.exit_code, 0) << p1.err;
  EXPECT_FALSE(fs::exists(dir + "/part/model.safetensors"));
  auto p2 = testutil::run_cli("-t 1 train --nproc 2 --resume --out '" + dir + "/part'");
  ASSERT_EQ(p2.exit_code, 0) << p2.err;
  EXPECT_LE(weights_diff(dir + "/two/model.safetensors", dir + "/part/model.safetensors"), 1e-6);
  // Resumed by one process: allowed, with a warning that the data order changes.
  auto p3 = testutil::run_cli("-t 1 " + common + "--batch 2 --nproc 2 --stop-after 2 --out '" + dir + "/part1'");
  ASSERT_EQ(p3.exit_code, 0) << p3.err;
  auto p4 = testutil::run_cli("-t 1 train --resume --out '" + dir + "/part1'");
  ASSERT_EQ(p4.exit_code, 0) << p4.err;
  EXPECT_NE(p4.err.find("written by a run of 2 process(es), this one has 1"), std::string::npos) << p4.err;
  EXPECT_EQ(read_checkpoint(dir + "/part1/checkpoints/last.safetensors").state.data_position, 2 * 4 + 2 * 2);
  // Flags that differ between ranks are refused.
  auto bad = testutil::run_command(
      "cd '" + dir + "' && for r in 0 1; do RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
      std::to_string(29700 + (getpid() % 200)) + " '" + DIFFNET_CLI + "' -t 1 " + common +
      "--batch 2 --pos-weight $((r + 1)) --dist-timeout 30 --out '" + dir + "/bad'$r & done; wait %1; a=$?; wait %2; "
      "echo \"rc $a $?\"");
  EXPECT_NE(bad.out.find("rc "), std::string::npos) << bad.out << bad.err;
  EXPECT_EQ(bad.out.find(" 0\n"), std::string::npos) << bad.out;  // rank 1 failed
  EXPECT_NE(bad.err.find("rank 1: its model or training flags differ from rank 0's"), std::string::npos) << bad.err;
  // Each checkpoint names the backend its run used, so a resume continues with it.
  EXPECT_EQ(read_checkpoint(dir + "/part/checkpoints/last.safetensors").state.linear_backend, "blas");
  EXPECT_EQ(read_checkpoint(dir + "/part/checkpoints/last.safetensors").state.conv_weight_grad, "ours");
}

std::string text_of(const std::string& path) {
  auto b = read_file(path);
  return std::string(b.begin(), b.end());
}

// Starts a 2-rank run in the background, waits for its first checkpoint, does `act` to rank 1 (its pid
// in $P) and reports how the rest ended: "rc R secs S" on stdout, the run's output in DIR/out.log.
testutil::CliResult disturb_rank(const std::string& dir, const std::string& launch, const std::string& act) {
  return testutil::run_command(
      "cd '" + dir + "' || exit 1; (" + launch + ") > out.log 2>&1 & L=$!; "
      "for i in $(seq 1200); do [ -f '" + dir + "/run/checkpoints/last.safetensors' ] && break; sleep 0.1; done; "
      "P=$(cat pid1 2>/dev/null || sed -n 's/.*launch: rank 1 pid \\([0-9]*\\).*/\\1/p' out.log); "
      "T0=$(date +%s.%N); " + act + "; wait $L; RC=$?; T1=$(date +%s.%N); kill -9 $P 2>/dev/null; "
      "echo \"rc $RC secs $(python3 -c \"print($T1 - $T0)\")\"");
}

TEST(Dist, AKilledOrHungRankEndsTheJob) {
  if (!diffnet::dist_backend_available("gloo"))
    GTEST_SKIP() << "this LibTorch has no c10d Gloo process group (make's builds require it)";
  std::string data = make_dataset(temp_dir("dist-kill-data"), 6, 96, 41);
  std::string dir = temp_dir("dist-kill");
  const std::string args = "-t 1 train --config '" + tiny_config(dir) + "' --data '" + data +
                           "' --size 64 --batch 2 --steps 100000 --warmup 1 --workers 1 --no-validate "
                           "--checkpoint-every 1 --dist-timeout 8 --out '" + dir + "/run'";
  auto secs = [](const std::string& out) {
    auto at = out.find("secs ");
    return at == std::string::npos ? 1e9 : std::stod(out.substr(at + 5));
  };
  // The local launcher: SIGKILL to rank 1 -> the launcher names it, stops rank 0, exits non-zero.
  auto r = disturb_rank(dir, std::string("'") + DIFFNET_CLI + "' " + args + " --nproc 2", "kill -9 $P");
  std::string log = text_of(dir + "/out.log");
  EXPECT_NE(r.out.find("rc "), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("rc 0"), std::string::npos) << r.out << log;
  EXPECT_LT(secs(r.out), 20) << r.out;
  EXPECT_NE(log.find("was killed by SIGKILL; stopping the other ranks"), std::string::npos) << log;
  EXPECT_GE(read_checkpoint(dir + "/run/checkpoints/last.safetensors").state.step, 1);  // loads, not corrupt

  // torchrun-style ranks (no launcher): rank 1 stopped (SIGSTOP, a hang), then killed: rank 0 gives up
  // after --dist-timeout with one line saying so, and the checkpoint still loads.
  fs::remove_all(dir + "/run");
  const std::string envs = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(29500 + (getpid() % 200));
  const std::string launch = "RANK=0 " + envs + " '" + DIFFNET_CLI + "' " + args + " & RANK=1 " + envs + " '" +
                             DIFFNET_CLI + "' " + args + " & echo $! > pid1; wait %1";
  r = disturb_rank(dir, launch, "kill -STOP $P");
  log = text_of(dir + "/out.log");
  EXPECT_EQ(r.out.find("rc 0"), std::string::npos) << r.out << log;
  EXPECT_LT(secs(r.out), 8 + 20) << r.out;
  EXPECT_NE(log.find("error: rank 0: lost contact with the other ranks during"), std::string::npos) << log;
  EXPECT_GE(read_checkpoint(dir + "/run/checkpoints/last.safetensors").state.step, 1);
}

}  // namespace
}  // namespace diffnet
