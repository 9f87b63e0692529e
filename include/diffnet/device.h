// Where tensors run: device names, synchronisation, GPU memory figures, bf16 autocast and CUDA graphs.
// Every function works in a CPU-only build: CUDA requests fail with a diffnet::Error that says why.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace diffnet {

// "cpu", "cuda" or "cuda:N" -> device. Throws Error("--device", ...) for another name, for CUDA in a
// build without CUDA kernels (configure with -DDIFFNET_CUDA=ON) or when no CUDA device is visible.
at::Device parse_device(const std::string& name);

// True when this build has CUDA and LibTorch sees at least one CUDA device.
bool cuda_available();

// Waits for the device's queued work (no-op on the CPU). Timings of CUDA work must call it.
void synchronize(const at::Device& device);

// One line naming the device: "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" or "cpu (2 threads)".
std::string device_description(const at::Device& device);

// The CPU's feature flags (the "flags" line of /proc/cpuinfo); empty where it cannot be read.
std::vector<std::string> cpu_flags();
// True when the CPU computes bf16 natively (AVX512-BF16 or AMX-BF16 in cpu_flags()): where bf16 inference
// pays; elsewhere LibTorch emulates it, slower than f32.
bool cpu_has_native_bf16();
// Inference precision "f32" | "bf16" | "auto" -> "f32", "bf16" or "measure". auto: "measure" on a CPU
// with native bf16 (native_bf16: time both, keep the faster; the Predictor does), f32 on other CPUs and on
// CUDA (bf16 there is asked for explicitly). Error("--precision") for another name.
std::string resolve_precision(const std::string& precision, const at::Device& device, bool native_bf16);

// Peak bytes held by LibTorch's CUDA caching allocator since the last reset (0 on the CPU).
void reset_peak_memory(const at::Device& device);
int64_t peak_memory_bytes(const at::Device& device);

// Whether autocast is on for `device_type` (kCPU or kCUDA; other types: false), through the API of the
// LibTorch built against (2.4 replaced the per-device calls, and warns at every call of the old ones).
bool autocast_enabled(at::DeviceType device_type);

// bf16 autocast on `device_type` while alive (fp32 weights; matmul/conv in bf16, norms and softmax in
// fp32, as LibTorch's autocast lists say). Restores the previous state; not nestable across threads.
class AutocastGuard {
 public:
  AutocastGuard(at::DeviceType device_type, bool enabled);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  at::DeviceType type_;
  bool enabled_ = false, prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kFloat;
};

// Runs `fn` under LibTorch's Kineto profiler (CPU operators, and GPU kernels and copies when `cuda`) and
// writes the Chrome trace (JSON, "traceEvents") to `path`; scripts/trace-summary.py sums kernel times.
// On the CPU, a LibTorch without Kineto (Debian's) runs `fn` under the legacy profiler instead (again,
// when the Kineto API is there but cannot save a trace), whose trace (a JSON array of CPU operator spans)
// trace-summary.py sums by operator self time. With `cuda`,
// throws Error when this LibTorch has no usable Kineto profiler.
void write_profile_trace(const std::string& path, bool cuda, const std::function<void()>& fn);

// A CUDA graph of one call with fixed shapes and addresses: capture() runs `fn` a few times on a side
// stream (warm-up), then records it once; replay() re-launches the recorded kernels (inputs are read
// from, and outputs written to, the same tensors as during capture). `fn` must not synchronise with
// the host. Throws Error in a build without CUDA.
class CudaGraph {
 public:
  CudaGraph();
  ~CudaGraph();
  void capture(const std::function<void()>& fn, int warmup = 3);
  void replay();
  bool captured() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace diffnet
