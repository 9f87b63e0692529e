// Device-parametrised checks of the zero-sum operator (see test_ops_checks.h).
#include "test_ops_checks.h"

#include <c10/core/GradMode.h>
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "diffnet/zero_sum.h"

namespace diffnet::opstest {

std::string Case::str() const {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "B=%ld C=%ld H=%ld W=%ld K=%ld M=%ld n_free=%ld", (long)B, (long)C, (long)H,
                (long)W, (long)K, (long)M, (long)n_free);
  return buf;
}

Inputs make_inputs(const Case& c, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto opt = at::TensorOptions().dtype(at::kDouble);
  Inputs in;
  in.x = at::normal(0.0, 1.0, {c.B, c.C, c.H, c.W}, gen, opt);
  in.theta = at::normal(0.0, 0.3, {c.C, c.M, c.K * c.K - 1}, gen, opt);
  in.weight = at::empty({c.C, c.M}, opt).uniform_(-1.0, 1.0, gen);
  in.bias = at::normal(0.0, 1.0, {c.C}, gen, opt);
  in.grad = at::normal(0.0, 1.0, {c.B, c.C, c.H, c.W}, gen, opt);
  return in;
}

at::Tensor with_layout(const at::Tensor& x, const std::string& layout) {
  if (layout == "channels_last") return x.contiguous(at::MemoryFormat::ChannelsLast);
  if (layout == "strided") {
    // Same values, non-contiguous: a transposed copy transposed back, then a stride-2 view of a
    // wider buffer along W.
    at::Tensor t = x.transpose(2, 3).contiguous().transpose(2, 3);
    at::Tensor wide = at::zeros({x.size(0), x.size(1), x.size(2), 2 * x.size(3)}, x.options());
    wide.slice(3, 0, 2 * x.size(3), 2).copy_(t);
    return wide.slice(3, 0, 2 * x.size(3), 2);
  }
  return x.contiguous();
}

Result run_impl(const Inputs& in, int64_t n_free, const std::string& impl, const at::Device& device,
                at::ScalarType dtype, const std::string& layout) {
  auto prep = [&](const at::Tensor& t) { return t.to(device, dtype).detach().requires_grad_(true); };
  at::Tensor x = with_layout(in.x.to(device, dtype), layout).detach().requires_grad_(true);
  at::Tensor theta = prep(in.theta), weight = prep(in.weight), bias = prep(in.bias);
  at::Tensor out = ops::zero_sum(x, theta, weight, bias, n_free, impl);
  auto grads = torch::autograd::grad({out}, {x, theta, weight, bias}, {in.grad.to(device, dtype)});
  auto host = [](const at::Tensor& t) { return t.detach().to(at::kCPU, at::kDouble).contiguous(); };
  return {host(out), host(grads[0]), host(grads[1]), host(grads[2]), host(grads[3])};
}

double max_rel_diff(const Result& a, const Result& b) {
  double worst = 0;
  const at::Tensor* pa[] = {&a.out, &a.dx, &a.dtheta, &a.dweight, &a.dbias};
  const at::Tensor* pb[] = {&b.out, &b.dx, &b.dtheta, &b.dweight, &b.dbias};
  for (int i = 0; i < 5; ++i) {
    if (pa[i]->sizes() != pb[i]->sizes()) return INFINITY;
    if (pa[i]->numel() == 0) continue;
    double scale = 1.0 + pb[i]->abs().max().item<double>();
    double d = (*pa[i] - *pb[i]).abs().max().item<double>() / scale;
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

double fd_check(const Case& c, const at::Device& device, uint64_t seed) {
  Inputs in = make_inputs(c, seed);
  auto dev = [&](const at::Tensor& t) { return t.to(device, at::kDouble); };
  at::Tensor x = dev(in.x), theta = dev(in.theta), weight = dev(in.weight), bias = dev(in.bias),
             g = dev(in.grad);
  auto loss = [&](const at::Tensor& xx, const at::Tensor& tt, const at::Tensor& ww, const at::Tensor& bb) {
    c10::NoGradGuard no_grad;
    return (ops::zero_sum_fused(xx, tt, ww, bb, c.n_free) * g).sum().item<double>();
  };
  Result r = run_impl(in, c.n_free, "fused", device, at::kDouble);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
  const double eps = 1e-6;
  double worst = 0;
  for (int dir = 0; dir < 2; ++dir) {
    for (int which = 0; which < 4; ++which) {
      at::Tensor base[4] = {x, theta, weight, bias};
      const at::Tensor& grad = which == 0 ? r.dx : which == 1 ? r.dtheta : which == 2 ? r.dweight : r.dbias;
      at::Tensor v = at::normal(0.0, 1.0, base[which].sizes(), gen, at::TensorOptions().dtype(at::kDouble));
      at::Tensor plus[4] = {x, theta, weight, bias}, minus[4] = {x, theta, weight, bias};
      plus[which] = base[which] + eps * dev(v);
      minus[which] = base[which] - eps * dev(v);
      double num = (loss(plus[0], plus[1], plus[2], plus[3]) - loss(minus[0], minus[1], minus[2], minus[3])) /
                   (2 * eps);
      double ana = (grad * v).sum().item<double>();
      worst = std::max(worst, std::abs(num - ana) / (std::abs(num) + std::abs(ana) + 1e-6));
    }
  }
  return worst;
}

bool deterministic(const Case& c, const at::Device& device, at::ScalarType dtype, uint64_t seed) {
  Inputs in = make_inputs(c, seed);
  Result a = run_impl(in, c.n_free, "fused", device, dtype);
  Result b = run_impl(in, c.n_free, "fused", device, dtype);
  return at::equal(a.dx, b.dx) && at::equal(a.dtheta, b.dtheta) && at::equal(a.dweight, b.dweight) &&
         at::equal(a.dbias, b.dbias);
}

std::vector<Case> sweep_cases() {
  const int64_t sizes[][2] = {{1, 1}, {2, 3}, {3, 3}, {5, 4}, {8, 8}, {13, 7}, {4, 17}, {37, 53}};
  const int n_sizes = sizeof(sizes) / sizeof(sizes[0]);
  std::vector<Case> cases;
  int i = 0;
  for (int64_t K : {3, 5, 7, 9}) {
    for (int64_t M : {1, 2, 4}) {
      for (int rep = 0; rep < 2; ++rep, ++i) {
        const int64_t* hw = sizes[i % n_sizes];
        const int64_t n_free = (i % 3 == 0) ? M : (i % 3 == 1) ? M / 2 : 0;
        cases.push_back({1 + i % 3, 3, hw[0], hw[1], K, M, n_free});
      }
    }
  }
  return cases;
}

int run_device_checks(const at::Device& device, bool verbose) {
  int failures = 0;
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "FAIL %s\n", what.c_str());
    ++failures;
  };
  const char* layouts[] = {"nchw", "channels_last", "strided"};
  int n = 0;
  double worst64 = 0, worst32 = 0, worst_fd = 0;
  for (const Case& c : sweep_cases()) {
    Inputs in = make_inputs(c, 1000 + n);
    Result ref = run_impl(in, c.n_free, "dense", at::kCPU, at::kDouble);
    const std::string layout = layouts[n % 3];
    Result f64 = run_impl(in, c.n_free, "fused", device, at::kDouble, layout);
    double d64 = max_rel_diff(f64, ref);
    worst64 = std::max(worst64, d64);
    if (!(d64 < 1e-10)) fail("fused float64 (" + layout + ") vs dense: " + c.str() + " rel diff " + std::to_string(d64));
    Result f32 = run_impl(in, c.n_free, "fused", device, at::kFloat, layout);
    double d32 = max_rel_diff(f32, ref);
    worst32 = std::max(worst32, d32);
    if (!(d32 < 2e-4)) fail("fused float32 (" + layout + ") vs dense: " + c.str() + " rel diff " + std::to_string(d32));
    // FD on every fourth case; not on 1x1 maps, where u is identically 0 (|u| on its kink) and the
    // differences are rounding noise (their values are covered by the dense agreement above).
    if (n % 4 == 0 && c.H * c.W > 1) {
      double fd = fd_check(c, device, 2000 + n);
      worst_fd = std::max(worst_fd, fd);
      if (!(fd < 1e-6)) fail("finite differences: " + c.str() + " rel err " + std::to_string(fd));
    }
    ++n;
  }
  Case det{2, 8, 45, 61, 7, 2, 1};
  if (!deterministic(det, device, at::kFloat, 7)) fail("determinism (float32): " + det.str());
  if (verbose)
    std::printf("[%s] %d cases: fused f64 vs dense max rel %.3g, f32 %.3g, FD worst %.3g, failures %d\n",
                device.str().c_str(), n, worst64, worst32, worst_fd, failures);
  return failures;
}

}  // namespace diffnet::opstest
