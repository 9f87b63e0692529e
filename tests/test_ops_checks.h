// Device-parametrised checks of the zero-sum operator, without GoogleTest, shared by tests/test_ops.cpp
// (CPU, and CUDA when available) and tests/test_ops_check.cpp (the standalone check run by
// scripts/gpu-check.sh on GPU machines). Every reference is computed on the CPU in float64 by the dense
// implementation (itself checked against an independent loop in test_ops.cpp) or by finite differences.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace diffnet::opstest {

struct Case {
  int64_t B, C, H, W, K, M, n_free;
  std::string str() const;
};

struct Inputs {
  at::Tensor x, theta, weight, bias, grad;  // grad: upstream gradient for backward
};

// Seeded random inputs (float64 on the CPU): x ~ N(0,1), theta ~ N(0, 0.3), weight ~ U(-1,1),
// bias ~ N(0,1), grad ~ N(0,1).
Inputs make_inputs(const Case& c, uint64_t seed);

// Input layouts the fused op must accept: "nchw", "channels_last", "strided" (a non-contiguous view).
at::Tensor with_layout(const at::Tensor& x, const std::string& layout);

// Forward and gradients of an implementation on given inputs (moved to device/dtype, layout applied).
struct Result {
  at::Tensor out, dx, dtheta, dweight, dbias;  // CPU float64
};
Result run_impl(const Inputs& in, int64_t n_free, const std::string& impl, const at::Device& device,
                at::ScalarType dtype, const std::string& layout = "nchw");

// Largest |a - b| / (1 + max|b|) over out and the four gradients.
double max_rel_diff(const Result& a, const Result& b);

// Directional finite differences (float64, central, eps 1e-6) of L = sum(out * grad) along random
// directions for x, theta, weight and bias, against the fused op's gradients. Returns the worst
// relative error |num - ana| / (|num| + |ana| + 1e-6) (the floor: on a 1x1 map u
// is 0 up to rounding, so both sides are rounding noise).
double fd_check(const Case& c, const at::Device& device, uint64_t seed);

// Two fused backward passes give bit-identical gradients.
bool deterministic(const Case& c, const at::Device& device, at::ScalarType dtype, uint64_t seed);

// The cases swept by the agreement checks: every K in {3,5,7,9} x M in {1,2,4}, families rotating
// (all free, mixed, all anchored), sizes from 1x1 to 37x53 (odd, non-square, smaller than K), B up to 3.
std::vector<Case> sweep_cases();

// Runs the sweep on a device: fused (float64, given layouts) vs dense float64 CPU, FD on a subset,
// determinism in float32. Prints one line per failure to stderr (and a summary to stdout when
// verbose); returns the number of failures.
int run_device_checks(const at::Device& device, bool verbose);

}  // namespace diffnet::opstest
