// Shared by the tests of the depthwise convolution, GRN and GELU operators (tests/test_ops_depthwise.cpp,
// tests/test_ops_grn.cpp, tests/test_ops_gelu.cpp): gradients of an op of (x, weight, bias), a relative
// error, GELU written out with LibTorch's erf, and the check of the JSON lines `diffnet bench --op ...
// --json` prints.
#pragma once

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace testutil {

struct Grads {
  at::Tensor y, dx, dw, db;
};

// Output and gradients of sum(y * r) for y = f(x, w, b).
template <typename F>
Grads run_grads(F f, const at::Tensor& x0, const at::Tensor& w0, const at::Tensor& b0, const at::Tensor& r) {
  at::Tensor x = x0.detach().clone().requires_grad_(true);
  at::Tensor w = w0.detach().clone().requires_grad_(true);
  at::Tensor b = b0.detach().clone().requires_grad_(true);
  at::Tensor y = f(x, w, b);
  (y * r).sum().backward();
  return {y.detach(), x.grad(), w.grad(), b.grad()};
}

// GELU in its erf form, 0.5 h (1 + erf(h / sqrt 2)), written with LibTorch's erf (not at::gelu), in h's
// dtype and differentiable by autograd: the tests' reference.
inline at::Tensor gelu_erf_reference(const at::Tensor& h) { return 0.5 * h * (1.0 + at::erf(h * M_SQRT1_2)); }

// max |a - ref| / max |ref|, in double.
inline double rel_err(const at::Tensor& a, const at::Tensor& ref) {
  const at::Tensor r = ref.to(at::kDouble);
  return (a.to(at::kDouble) - r).abs().max().item<double>() / std::max(1e-30, r.abs().max().item<double>());
}

// Every line of `out` that starts with `prefix`, as its text and the numbers of `keys` (-1 where a key
// is missing from the line).
struct BenchLine {
  std::string text;
  std::map<std::string, double> num;
};

inline std::vector<BenchLine> bench_json_lines(const std::string& out, const std::string& prefix,
                                               const std::vector<std::string>& keys) {
  std::vector<BenchLine> lines;
  size_t at = 0;
  while ((at = out.find(prefix, at)) != std::string::npos) {
    const size_t end = out.find('\n', at);
    BenchLine line{out.substr(at, end == std::string::npos ? std::string::npos : end - at), {}};
    for (const std::string& key : keys) {
      const size_t k = line.text.find("\"" + key + "\":");
      line.num[key] = k == std::string::npos ? -1.0 : std::stod(line.text.substr(k + key.size() + 3));
    }
    lines.push_back(line);
    if (end == std::string::npos) break;
    at = end;
  }
  return lines;
}

// Checks every benchmark line of `out` starting with `prefix`: both timings (`base_key`, `own_key`)
// positive and "speedup" their ratio. Returns how many lines there were.
inline size_t expect_bench_lines(const std::string& out, const std::string& prefix, const std::string& base_key,
                                 const std::string& own_key) {
  const auto lines = bench_json_lines(out, prefix, {base_key, own_key, "speedup"});
  for (const auto& line : lines) {
    const double a = line.num.at(base_key), o = line.num.at(own_key), r = line.num.at("speedup");
    EXPECT_GT(a, 0.0) << line.text;
    EXPECT_GT(o, 0.0) << line.text;
    EXPECT_NEAR(r, a / o, 1e-3 * r + 1e-3) << line.text;
  }
  return lines.size();
}

}  // namespace testutil
