// `diffnet bench` for the model.
#include "model/model_bench.h"

#include <torch/torch.h>
#if __has_include(<torch/csrc/autograd/profiler_legacy.h>)
#include <torch/csrc/autograd/profiler_legacy.h>
#define DIFFNET_HAVE_LEGACY_PROFILER 1
#endif

#include <algorithm>
#include <cstdio>

#include "diffnet/common.h"
#include "diffnet/model.h"
#include "model/model_info.h"

namespace diffnet {

int run_model_bench(const ModelBenchOptions& opt) {
  if (opt.mode != "infer" && opt.mode != "train")
    throw Error("bench", "--mode must be infer or train, got '" + opt.mode + "'");
  if (opt.size <= 0 || opt.size % 32 != 0)
    throw Error("bench", "--size must be a positive multiple of 32, got " + std::to_string(opt.size));
  if (opt.batch <= 0 || opt.iters <= 0 || opt.warmup < 0) throw Error("bench", "--batch/--iters must be positive");
  if (opt.dtype != "f32" && opt.dtype != "bf16") throw Error("bench", "--dtype must be f32 or bf16");
  if (opt.dtype == "bf16" && opt.mode == "train") throw Error("bench", "--dtype bf16 is for --mode infer only");
  ModelConfig cfg = model_preset(opt.preset);
  for (const auto& a : opt.ablations) apply_ablation(cfg, a);
  if (!opt.disc_impl.empty()) cfg.disc_impl = opt.disc_impl;
  cfg.validate();
  torch::manual_seed(0);
  DiffNet model(cfg);
  if (!opt.disc_impl.empty()) model->set_disc_impl(opt.disc_impl);  // also forces it for inference
  const int64_t B = opt.batch, S = opt.size;
  at::Tensor rgb = torch::randn({B, 3, S, S}).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor dct = torch::randint(0, 21, {B, S, S}, at::kLong);
  at::Tensor qt = torch::randint(1, 256, {B, 64}, at::kLong);
  at::Tensor mask = torch::randint(0, 2, {B, S, S}, at::kLong);
  at::Tensor label = torch::randint(0, 2, {B}, at::kLong);

  std::vector<double> times;
  std::unique_ptr<torch::optim::AdamW> optim;
  if (opt.mode == "train") {
    model->train();
    optim = std::make_unique<torch::optim::AdamW>(model->parameters(),
                                                  torch::optim::AdamWOptions(1e-4).weight_decay(0.01));
  } else {
    model->eval();
    if (opt.dtype == "bf16") {
      model->to(at::kBFloat16);
      rgb = rgb.to(at::kBFloat16);
    }
  }
  auto iteration = [&] {
    if (opt.mode == "infer") {
      torch::NoGradGuard no_grad;
      DiffNetOutput out = model->forward(rgb, dct, qt);
      (void)out.seg_logits.sum().item<float>();
    } else {
      optim->zero_grad();
      DiffNetOutput out = model->forward(rgb, dct, qt);
      at::Tensor loss = at::cross_entropy_loss(out.seg_logits, mask) + at::cross_entropy_loss(out.cls_logits, label);
      loss.backward();
      optim->step();
    }
  };
  Progress progress("bench " + opt.preset + " " + opt.mode, opt.warmup + opt.iters, opt.quiet || opt.json, 2.0);
  for (int i = 0; i < opt.warmup + opt.iters; ++i) {
    const double t0 = now_seconds();
    iteration();
    const double dt = now_seconds() - t0;
    if (i >= opt.warmup) times.push_back(dt);
    progress.step();
  }
  progress.finish();
  if (!opt.profile.empty()) {
#ifdef DIFFNET_HAVE_LEGACY_PROFILER
    torch::autograd::profiler::RecordProfile guard(opt.profile);
    iteration();
#else
    throw Error("bench", "--profile: this LibTorch has no legacy profiler (RecordProfile)");
#endif
  }
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  const double med = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  const int64_t params = count_parameters(model);
  double gflop = 0;
  for (const auto& c : model_costs(model, S, S)) gflop += c.flops;
  gflop *= static_cast<double>(B) / 1e9;
  if (opt.mode == "train") gflop *= 3.0;  // forward + backward ~ 3x forward
  const int threads = at::get_num_threads();
  if (opt.json) {
    nlohmann::json j = {{"preset", opt.preset},       {"ablations", opt.ablations}, {"size", S},
                        {"mode", opt.mode},           {"batch", B},                 {"iters", opt.iters},
                        {"warmup", opt.warmup},       {"disc_impl", cfg.disc_impl}, {"dtype", opt.dtype},
                        {"threads", threads},         {"median_ms", med * 1e3},     {"it_per_s", 1.0 / med},
                        {"images_per_s", B / med},    {"params", params},           {"gflop_per_it", gflop},
                        {"gflop_per_s", gflop / med}, {"min_ms", times.front() * 1e3}, {"max_ms", times.back() * 1e3}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s %s %lldx%lld batch %lld (%s, disc %s, %d threads): %.1f ms/it, %.3f it/s, %.2f img/s "
                "[median of %d after %d warm-up; min %.1f max %.1f ms; %.1f GFLOP/it analytic%s, %.1f GFLOP/s]\n",
                opt.preset.c_str(), opt.mode.c_str(), static_cast<long long>(S), static_cast<long long>(S),
                static_cast<long long>(B), opt.dtype.c_str(), cfg.disc_impl.c_str(), threads, med * 1e3, 1.0 / med,
                B / med, opt.iters, opt.warmup, times.front() * 1e3, times.back() * 1e3, gflop,
                opt.mode == "train" ? " (3x fwd)" : "", gflop / med);
  }
  return 0;
}

}  // namespace diffnet
