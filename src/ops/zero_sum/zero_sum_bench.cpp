// `diffnet bench --op zero-sum`: dense (best LibTorch composition) vs fused, forward (no grad) and
// forward+backward, on the four stage shapes of `base` (D = 256 at strides 4, 8, 16, 32) at 512 and 768,
// B = 1 and 2. Median of `iters` timed runs after one warm-up.
#include "diffnet/zero_sum_bench.h"

#include <c10/core/GradMode.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>


#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "diffnet/common.h"
#include "diffnet/device.h"
#include "diffnet/zero_sum.h"
#include "ops/zero_sum/zero_sum_impl.h"

namespace diffnet::ops {
namespace {

struct BenchCase {
  std::string name;
  int64_t B, C, H, W;
};

std::vector<BenchCase> bench_cases(bool quick) {
  if (quick) return {{"quick-s8-B1", 1, 16, 32, 24}, {"quick-s32-B2", 2, 16, 8, 8}};
  std::vector<BenchCase> cases;
  for (int64_t size : {512, 768})
    for (int64_t B : {1, 2})
      for (int64_t stride : {4, 8, 16, 32})
        cases.push_back({"base-" + std::to_string(size) + "-s" + std::to_string(stride) + "-B" + std::to_string(B), B,
                         256, size / stride, size / stride});
  return cases;
}

double median_ms(int iters, const at::Device& device, bool cpu_clock, const std::function<void()>& fn) {
  fn();  // warm-up
  diffnet::synchronize(device);
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const double t0 = cpu_clock ? process_cpu_seconds() : now_seconds();
    fn();
    diffnet::synchronize(device);
    t.push_back(((cpu_clock ? process_cpu_seconds() : now_seconds()) - t0) * 1e3);
  }
  return median(std::move(t));
}

}  // namespace

int run_zero_sum_bench(const ZeroSumBenchOptions& opt) {
  if (opt.iters < 1) throw Error("bench", "--iters must be >= 1");
  if (opt.layout != "nchw" && opt.layout != "channels_last")
    throw Error("bench", "layout must be nchw or channels_last, got '" + opt.layout + "'");
  at::Device device(at::kCPU);
  if (opt.device == "cuda") {
    if (!zero_sum_cuda_available())
      throw Error("bench", zero_sum_has_cuda() ? "no usable CUDA device" : "this build has no CUDA kernels");
    device = at::Device(at::kCUDA, 0);
  } else if (opt.device != "cpu") {
    throw Error("bench", "device must be cpu or cuda, got '" + opt.device + "'");
  }
  std::string clock = opt.clock;
  if (const char* env = std::getenv("DIFFNET_BENCH_CLOCK")) clock = env;
  if (clock != "wall" && clock != "cpu") throw Error("bench", "clock must be wall or cpu, got '" + clock + "'");
  const bool cpu_clock = clock == "cpu";
  const int64_t K = 7, M = 2, n_free = 1;

  if (!opt.json && !opt.layout_report)
    std::printf("zero-sum K=%ld M=%ld, %s, %d threads, input %s, %s time, median of %d after 1 warm-up\n"
                "%-18s %-20s %-8s %-16s %10s %10s %8s\n",
                (long)K, (long)M, device.str().c_str(), at::get_num_threads(), opt.layout.c_str(), clock.c_str(),
                opt.iters,
                "case", "shape", "pass", "dense variant", "dense ms", "fused ms", "speedup");
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1234);
  for (const BenchCase& bc : bench_cases(opt.quick)) {
    if (!opt.filter.empty() && bc.name.find(opt.filter) == std::string::npos) continue;
    auto fopt = at::TensorOptions().dtype(at::kFloat);
    at::Tensor x = at::normal(0.0, 1.0, {bc.B, bc.C, bc.H, bc.W}, gen, fopt).to(device);
    if (opt.layout == "channels_last") x = x.contiguous(at::MemoryFormat::ChannelsLast);
    at::Tensor g = at::normal(0.0, 1.0, {bc.B, bc.C, bc.H, bc.W}, gen, fopt).to(device);
    at::Tensor theta = at::normal(0.0, 0.02, {bc.C, M, K * K - 1}, gen, fopt).to(device);
    at::Tensor weight = (at::rand({bc.C, M}, gen, fopt) - 0.5).to(device);
    at::Tensor bias = at::zeros({bc.C}, fopt).to(device);
    auto fwd = [&](const std::string& impl) -> std::function<void()> {
      return [&, impl] {
        c10::NoGradGuard no_grad;
        if (impl == "fused") zero_sum_fused(x, theta, weight, bias, n_free);
        else detail::dense_from_kernels(x, zero_sum_kernels(theta, n_free), weight, bias, "abs", impl);
      };
    };
    auto train = [&](const std::string& impl) -> std::function<void()> {
      return [&, impl] {
        at::Tensor xx = x.detach().requires_grad_(true), tt = theta.detach().requires_grad_(true),
                   ww = weight.detach().requires_grad_(true), bb = bias.detach().requires_grad_(true);
        at::Tensor out = impl == "fused" ? zero_sum_fused(xx, tt, ww, bb, n_free)
                                         : detail::dense_from_kernels(xx, zero_sum_kernels(tt, n_free), ww, bb,
                                                                      "abs", impl);
        out.backward(g);
      };
    };
    if (opt.layout_report) {
      c10::NoGradGuard no_grad;
      const auto cl = at::MemoryFormat::ChannelsLast;
      at::Tensor xc = x.contiguous(cl), up = g.contiguous(cl);
      auto nchw_out = [&] { return zero_sum_fused(detail::to_planes(xc), theta, weight, bias, n_free); };
      const double a = median_ms(opt.iters, device, cpu_clock, [&] { zero_sum_fused(xc, theta, weight, bias, n_free); });
      const double b = median_ms(opt.iters, device, cpu_clock, [&] { nchw_out(); });
      const double ac = median_ms(opt.iters, device, cpu_clock, [&] {
        (zero_sum_fused(xc, theta, weight, bias, n_free) + up).contiguous(cl);
      });
      const double bcn = median_ms(opt.iters, device, cpu_clock, [&] { (nchw_out() + up).contiguous(cl); });
      std::printf("{\"case\":\"%s\",\"shape\":[%ld,%ld,%ld,%ld],\"cl_out_ms\":%.3f,\"nchw_out_ms\":%.3f,"
                  "\"cl_out_consumer_ms\":%.3f,\"nchw_out_consumer_ms\":%.3f,\"device\":\"%s\",\"threads\":%d,"
                  "\"clock\":\"%s\"}\n",
                  bc.name.c_str(), (long)bc.B, (long)bc.C, (long)bc.H, (long)bc.W, a, b, ac, bcn,
                  device.str().c_str(), at::get_num_threads(), clock.c_str());
      std::fflush(stdout);
      continue;
    }
    // Default: "dense" is the faster of the two leading compositions, timed here per case (the rule in
    // zero_sum_dense picks one of them); --all-dense: one line per composition.
    std::vector<std::string> variants = {"split", "split_cl"};
    if (opt.all_dense) variants = detail::dense_variants();
    const char* passes[] = {"fwd", "fwd+bwd"};
    for (int p = 0; p < 2; ++p) {
      const double fused_ms = median_ms(opt.iters, device, cpu_clock, p == 0 ? fwd("fused") : train("fused"));
      std::vector<std::pair<std::string, double>> rows;
      for (const std::string& v : variants)
        rows.emplace_back(v, median_ms(opt.iters, device, cpu_clock, p == 0 ? fwd(v) : train(v)));
      if (!opt.all_dense) {
        auto best = std::min_element(rows.begin(), rows.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
        rows = {*best};
      }
      for (const auto& [v, dense_ms] : rows) {
        const double speedup = dense_ms / fused_ms;
        if (opt.json) {
          std::printf("{\"case\":\"%s\",\"shape\":[%ld,%ld,%ld,%ld],\"pass\":\"%s\",\"dense_ms\":%.3f,"
                      "\"fused_ms\":%.3f,\"speedup\":%.3f,\"dense_variant\":\"%s\",\"device\":\"%s\","
                      "\"layout\":\"%s\",\"threads\":%d,\"clock\":\"%s\"}\n",
                      bc.name.c_str(), (long)bc.B, (long)bc.C, (long)bc.H, (long)bc.W, passes[p], dense_ms,
                      fused_ms, speedup, v.c_str(), device.str().c_str(), opt.layout.c_str(), at::get_num_threads(),
                      clock.c_str());
        } else {
          char shape[64];
          std::snprintf(shape, sizeof(shape), "%ldx%ldx%ldx%ld", (long)bc.B, (long)bc.C, (long)bc.H, (long)bc.W);
          std::printf("%-18s %-20s %-8s %-16s %10.2f %10.2f %7.2fx\n", bc.name.c_str(), shape, passes[p], v.c_str(),
                      dense_ms, fused_ms, speedup);
        }
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace diffnet::ops
