// `diffnet bench` for the model.
#include "train/bench.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

#include "diffnet/common.h"
#include "diffnet/conv_grad.h"
#include "diffnet/device.h"
#include "diffnet/model.h"
#include "diffnet/train.h"
#include "model/convnext.h"
#include "model/model_info.h"

namespace diffnet {
namespace {

// The machine's matrix rate on `device` in `dtype` at the current threads, in GFLOP/s: the faster of one
// large matrix product (n x n by n x n, n = 2048 on a CPU, 8192 on a GPU) and one large 1x1 convolution
// as the model's Linear layers run it (512 -> 512 channels over 64 x 64 channels_last pixels, batch 4;
// oneDNN on a CPU), each best of 5 after 2 warm-up. What the work that suits the machine best gets,
// against which the model's parts are read.
double matrix_gflops(const at::Device& device, at::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  const auto opts = at::TensorOptions().dtype(dtype).device(device);
  auto best_rate = [&](double flops, const std::function<void()>& run) {
    double best = 1e30;
    for (int i = 0; i < 7; ++i) {
      synchronize(device);
      const double t0 = now_seconds();
      run();
      synchronize(device);
      if (i >= 2) best = std::min(best, now_seconds() - t0);
    }
    return flops / best / 1e9;
  };
  const int64_t n = device.is_cuda() ? 8192 : 2048;
  const at::Tensor a = at::full({n, n}, 0.01, opts), b = at::full({n, n}, 0.02, opts);
  const double mm = best_rate(2.0 * double(n) * double(n) * double(n), [&] { (void)at::mm(a, b); });
  const int64_t B = 4, C = 512, P = 64;
  const at::Tensor x = at::full({B, C, P, P}, 0.01, opts).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor w = at::full({C, C, 1, 1}, 0.02, opts), bias = at::zeros({C}, opts);
  const double conv = best_rate(2.0 * double(B * C * C * P * P), [&] { (void)model::pointwise_conv(x, w, bias); });
  return std::max(mm, conv);
}

}  // namespace

int run_model_bench(const ModelBenchOptions& opt) {
  if (opt.mode != "infer" && opt.mode != "train")
    throw Error("bench", "--mode must be infer or train, got '" + opt.mode + "'");
  if (opt.size <= 0 || opt.size % 32 != 0)
    throw Error("bench", "--size must be a positive multiple of 32, got " + std::to_string(opt.size));
  if (opt.batch <= 0 || opt.iters <= 0 || opt.warmup < 0) throw Error("bench", "--batch/--iters must be positive");
  if (opt.dtype != "f32" && opt.dtype != "bf16") throw Error("bench", "--dtype must be f32 or bf16");
  if (opt.dtype == "bf16" && opt.mode == "train")
    throw Error("bench", "--dtype bf16 converts the weights and is for --mode infer only (train: --amp)");
  if (opt.dtype == "bf16" && opt.amp) throw Error("bench", "--amp and --dtype bf16 exclude each other");
  const at::Device device = parse_device(opt.device);
  if (opt.graph && !device.is_cuda()) throw Error("bench", "--graph needs --device cuda");
  if (opt.graph && opt.mode != "infer") throw Error("bench", "--graph is for --mode infer");
  ModelConfig cfg = model_preset(opt.preset);
  for (const auto& a : opt.ablations) apply_ablation(cfg, a);
  if (!opt.disc_impl.empty()) cfg.disc_impl = opt.disc_impl;
  cfg.validate();
  torch::manual_seed(0);
  DiffNet model(cfg);
  if (!opt.disc_impl.empty()) model->set_disc_impl(opt.disc_impl);  // also forces it for inference
  model->to(device);
  if (device.is_cuda()) at::globalContext().setBenchmarkCuDNN(true);  // fixed shapes: pick the fastest algorithms
  const int64_t B = opt.batch, S = opt.size;
  // Inputs are made on the CPU (same values whatever the device) and moved once.
  at::Tensor rgb = torch::randn({B, 3, S, S}).to(device).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor dct = torch::randint(0, 21, {B, S, S}, at::kLong).to(device);
  at::Tensor qt = torch::randint(1, 256, {B, 64}, at::kLong).to(device);
  at::Tensor mask = torch::randint(0, 2, {B, S, S}, at::kLong).to(device);

  std::unique_ptr<AdamW> optim;
  TrainConfig tcfg;  // the trainer's loss weights and AdamW defaults
  if (opt.mode == "train") {
    model->train();
    optim = std::make_unique<AdamW>(optimizer_params(model, tcfg), tcfg.beta1, tcfg.beta2, tcfg.eps);
  } else {
    model->eval();
    if (opt.dtype == "bf16") {
      model->to(at::kBFloat16);
      rgb = rgb.to(at::kBFloat16);
    }
  }
  at::Tensor out_sink;  // inference output kept alive (and fixed in memory for graph replays)
  auto iteration = [&] {
    AutocastGuard amp(device.type(), opt.amp);
    if (opt.mode == "infer") {
      torch::NoGradGuard no_grad;
      DiffNetOutput out = model->forward(rgb, dct, qt);
      out_sink = out.seg_logits;
    } else {
      DiffNetOutput out = model->forward(rgb, dct, qt);
      LossParts lp = diffnet_loss(out, mask, tcfg);
      lp.total.backward();
      optim->step(1e-4);
      optim->zero_grad();
    }
  };
  CudaGraph graph;
  auto run_once = [&] {
    if (opt.graph) graph.replay();
    else iteration();
  };
  if (opt.graph) {
    graph.capture([&] {
      torch::NoGradGuard no_grad;
      iteration();
    });
  }
  std::vector<double> times;
  if (opt.warmup == 0) reset_peak_memory(device);
  Progress progress("bench " + opt.preset + " " + opt.mode, opt.warmup + opt.iters, opt.quiet || opt.json, 2.0);
  for (int i = 0; i < opt.warmup + opt.iters; ++i) {
    synchronize(device);
    const double t0 = now_seconds();
    run_once();
    if (opt.mode == "infer" && !device.is_cuda()) (void)out_sink.sum().item<float>();
    synchronize(device);
    const double dt = now_seconds() - t0;
    if (i >= opt.warmup) times.push_back(dt);
    // Peak memory of the timed iterations only (cuDNN's algorithm search in warm-up takes large workspaces).
    if (i + 1 == opt.warmup) reset_peak_memory(device);
    progress.step();
  }
  progress.finish();
  const int64_t peak = peak_memory_bytes(device);

  // Per-part forward times: the model's trace hook synchronises after each part. Each part's analytic
  // FLOPs (batch B) against the machine's matrix rate say how far from the arithmetic limit it runs.
  std::map<std::string, double> part_ms, part_gflop;
  double matrix_rate = 0;
  if (opt.parts) {
    std::map<std::string, std::vector<double>> samples;
    double last = 0;
    model->set_trace([&](const char* part) {
      synchronize(device);
      const double t = now_seconds();
      if (std::string(part) != "start") samples[part].push_back((t - last) * 1e3);
      last = t;
    });
    for (int i = 0; i < std::max(3, opt.iters / 2); ++i) {
      AutocastGuard amp(device.type(), opt.amp);
      torch::NoGradGuard no_grad;
      (void)model->forward(rgb, dct, qt);
    }
    model->set_trace(nullptr);
    for (auto& kv : samples) part_ms[kv.first] = median(kv.second);
    for (const auto& c : model_costs(model, S, S)) part_gflop[part_of_module(c.name)] += c.flops * B / 1e9;
    matrix_rate = matrix_gflops(device, opt.dtype == "bf16" || opt.amp ? at::kBFloat16 : at::kFloat);
  }
  if (!opt.profile.empty()) {
    // Three more iterations, as timed above (graph replays when --graph), then one device sync.
    write_profile_trace(opt.profile, device.is_cuda(), [&] {
      for (int i = 0; i < 3; ++i) run_once();
      synchronize(device);
    });
  }
  const double med = median(times);
  std::sort(times.begin(), times.end());
  const int64_t params = count_parameters(model);
  double gflop = 0;
  for (const auto& c : model_costs(model, S, S)) gflop += c.flops;
  gflop *= static_cast<double>(B) / 1e9;
  if (opt.mode == "train") gflop *= 3.0;  // forward + backward ~ 3x forward
  const int threads = at::get_num_threads();
  const std::string precision = opt.amp ? "bf16-autocast" : (opt.dtype == "bf16" ? "bf16-weights" : "f32");
  const std::string dev_name = device_description(device);
  if (opt.json) {
    nlohmann::json j = {{"preset", opt.preset},       {"ablations", opt.ablations}, {"size", S},
                        {"mode", opt.mode},           {"batch", B},                 {"iters", opt.iters},
                        {"warmup", opt.warmup},       {"disc_impl", cfg.disc_impl}, {"dtype", opt.dtype},
                        {"precision", precision},     {"graph", opt.graph},         {"device", device.str()},
                        {"device_name", dev_name},    {"threads", threads},         {"median_ms", med * 1e3},
                        {"it_per_s", 1.0 / med},      {"images_per_s", B / med},    {"params", params},
                        {"gflop_per_it", gflop},      {"gflop_per_s", gflop / med}, {"min_ms", times.front() * 1e3},
                        {"max_ms", times.back() * 1e3}, {"peak_memory_mib", static_cast<double>(peak) / (1 << 20)}};
    if (!part_ms.empty()) {
      j["parts_ms"] = part_ms;
      j["parts_gflop"] = part_gflop;
      j["matrix_gflop_per_s"] = matrix_rate;
    }
    if (device.is_cpu()) j["linear"] = linear_backend();
    if (device.is_cpu() && opt.mode == "train") j["conv_weight_grad"] = ops::conv_weight_grad();
    std::printf("%s\n", j.dump().c_str());
  } else {
    const std::string wgrad = device.is_cpu() && opt.mode == "train" ? ", conv wgrad " + ops::conv_weight_grad() : "";
    std::printf("%s %s %lldx%lld batch %lld on %s (%s%s, disc %s, linear %s%s, %d threads): %.2f ms/it, %.3f it/s, %.2f img/s "
                "[median of %d after %d warm-up; min %.2f max %.2f ms; %.1f GFLOP/it analytic%s, %.1f GFLOP/s",
                opt.preset.c_str(), opt.mode.c_str(), static_cast<long long>(S), static_cast<long long>(S),
                static_cast<long long>(B), dev_name.c_str(), precision.c_str(), opt.graph ? ", CUDA graph" : "",
                cfg.disc_impl.c_str(), device.is_cpu() ? linear_backend().c_str() : "blas", wgrad.c_str(), threads, med * 1e3, 1.0 / med, B / med, opt.iters, opt.warmup,
                times.front() * 1e3, times.back() * 1e3, gflop, opt.mode == "train" ? " (3x fwd)" : "", gflop / med);
    if (device.is_cuda()) std::printf("; peak %.0f MiB", static_cast<double>(peak) / (1 << 20));
    std::printf("]\n");
    if (!part_ms.empty())
      std::printf("  matrix rate (%s, same threads; bench.cpp matrix_gflops): %.1f GFLOP/s; the model: %.0f %%\n",
                  opt.dtype == "bf16" || opt.amp ? "bf16" : "f32", matrix_rate, 100.0 * gflop / med / matrix_rate);
    for (const auto& kv : part_ms) {
      const double g = part_gflop.count(kv.first) ? part_gflop.at(kv.first) : 0.0;
      std::printf("  part %-12s %8.2f ms %8.3f GFLOP %7.1f GFLOP/s (%3.0f %%)\n", kv.first.c_str(), kv.second, g,
                  g / (kv.second / 1e3), 100.0 * g / (kv.second / 1e3) / matrix_rate);
    }
  }
  return 0;
}

}  // namespace diffnet
