// Devices: parsing, synchronisation, descriptions, GPU memory, autocast and CUDA graphs.
#include "diffnet/device.h"

#include "diffnet/cpu_isa.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/version.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "diffnet/common.h"

// Set by CMake (on this file only) when a program using the Kineto profiler API below compiles against this LibTorch.
#ifdef DIFFNET_HAVE_KINETO_PROFILER
#include <torch/csrc/autograd/profiler_kineto.h>
#endif

#ifdef DIFFNET_WITH_CUDA
// No ATen/cuda/CUDAContext.h: it pulls in cuBLAS/cuSOLVER headers that a bare toolkit may lack.
#include <ATen/cuda/CUDAGraph.h>
#include <cuda_runtime_api.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

// LibTorch 2.4 replaced the per-device autocast setters by ones taking the device type.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define DIFFNET_AUTOCAST_BY_DEVICE_TYPE 1
#endif

namespace diffnet {

bool cuda_available() {
#ifdef DIFFNET_WITH_CUDA
  return torch::cuda::is_available();
#else
  return false;
#endif
}

at::Device parse_device(const std::string& name) {
  if (name == "cpu") return at::Device(at::kCPU);
  if (name != "cuda" && name.rfind("cuda:", 0) != 0)
    throw Error("device", "must be cpu, cuda or cuda:N, got '" + name + "'");
#ifndef DIFFNET_WITH_CUDA
  throw Error("device", "'" + name + "': this build has no CUDA (configure with -DDIFFNET_CUDA=ON against a "
                          "CUDA-enabled LibTorch)");
#else
  if (!torch::cuda::is_available()) throw Error("device", "'" + name + "': no CUDA device is visible");
  int64_t index = 0;
  if (name.size() > 5) {
    try {
      size_t used = 0;
      index = std::stoll(name.substr(5), &used);
      if (used != name.size() - 5) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw Error("device", "bad CUDA device index in '" + name + "'");
    }
  }
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  if (index < 0 || index >= count)
    throw Error("device", "'" + name + "': only " + std::to_string(count) + " CUDA device(s) visible");
  return at::Device(at::kCUDA, static_cast<at::DeviceIndex>(index));
#endif
}

void synchronize(const at::Device& device) {
#ifdef DIFFNET_WITH_CUDA
  if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
#else
  (void)device;
#endif
}

namespace {

// The value of the first "key : value" line of /proc/cpuinfo with this key ("" when none).
std::string cpuinfo_field(const std::string& wanted) {
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || colon == 0) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    if (key == wanted) return colon + 2 <= line.size() ? line.substr(colon + 2) : "";
  }
  return "";
}

}  // namespace

std::vector<std::string> cpu_flags() {
  std::istringstream in(cpuinfo_field("flags"));
  std::vector<std::string> flags;
  for (std::string f; in >> f;) flags.push_back(f);
  return flags;
}

bool cpu_has_native_bf16() {
  for (const std::string& f : cpu_flags())
    if (f == "avx512_bf16" || f == "amx_bf16") return true;
  return false;
}

std::string resolve_precision(const std::string& precision, const at::Device& device, bool native_bf16) {
  if (precision == "f32" || precision == "bf16") return precision;
  if (precision != "auto") throw Error("precision", "expected f32, bf16 or auto, got '" + precision + "'");
  return device.is_cpu() && native_bf16 ? "measure" : "f32";
}

std::string device_description(const at::Device& device) {
#ifdef DIFFNET_WITH_CUDA
  if (device.is_cuda()) {
    const int index = device.has_index() ? device.index() : 0;
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return "cuda:" + std::to_string(index);
    const cudaDeviceProp* p = &prop;
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %.1f GiB, %d SMs)", p->name, p->major, p->minor,
                  static_cast<double>(p->totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), p->multiProcessorCount);
    return buf;
  }
#endif
  // The CPU model and the vector extensions LibTorch's kernels can use (a timing means little without them).
  const std::string model = cpuinfo_field("model name");
  const std::vector<std::string> flags = cpu_flags();
  const std::set<std::string> have(flags.begin(), flags.end());
  std::string isa;
  for (const char* want : {"avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile"})
    if (have.count(want)) isa += (isa.empty() ? "" : " ") + std::string(want);
  if (isa.empty() && !flags.empty()) isa = "no avx2";
  return "cpu (" + (model.empty() ? std::string() : model + "; ") + (isa.empty() ? "" : isa + "; ") + "kernels " +
         cpu_isa_name(cpu_isa()) + "; " + std::to_string(at::get_num_threads()) + " threads)";
}

void reset_peak_memory(const at::Device& device) {
#ifdef DIFFNET_WITH_CUDA
  if (device.is_cuda())
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device.has_index() ? device.index() : 0));
#else
  (void)device;
#endif
}

int64_t peak_memory_bytes(const at::Device& device) {
#ifdef DIFFNET_WITH_CUDA
  if (device.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(
        static_cast<c10::DeviceIndex>(device.has_index() ? device.index() : 0));
    return static_cast<int64_t>(stats.allocated_bytes[0].peak);  // [0]: all pools together
  }
#else
  (void)device;
#endif
  return 0;
}

bool autocast_enabled(at::DeviceType device_type) {
  if (device_type != at::kCPU && device_type != at::kCUDA) return false;
#ifdef DIFFNET_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::is_autocast_enabled(device_type);
#else
  return device_type == at::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

AutocastGuard::AutocastGuard(at::DeviceType device_type, bool enabled) : type_(device_type), enabled_(enabled) {
  if (!enabled_) return;
  if (type_ != at::kCPU && type_ != at::kCUDA) throw Error("autocast", "only CPU and CUDA are supported");
  prev_enabled_ = autocast_enabled(type_);
#ifdef DIFFNET_AUTOCAST_BY_DEVICE_TYPE
  prev_dtype_ = at::autocast::get_autocast_dtype(type_);
  at::autocast::set_autocast_dtype(type_, at::kBFloat16);
  at::autocast::set_autocast_enabled(type_, true);
#else
  if (type_ == at::kCUDA) {
    prev_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(true);
  } else {
    prev_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  }
#endif
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
  // Leaving the outermost region drops the cache of casted weights (they change at every step).
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#ifdef DIFFNET_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_enabled(type_, prev_enabled_);
  at::autocast::set_autocast_dtype(type_, prev_dtype_);
#else
  if (type_ == at::kCUDA) {
    at::autocast::set_enabled(prev_enabled_);
    at::autocast::set_autocast_gpu_dtype(prev_dtype_);
  } else {
    at::autocast::set_cpu_enabled(prev_enabled_);
    at::autocast::set_autocast_cpu_dtype(prev_dtype_);
  }
#endif
}

#ifdef DIFFNET_WITH_CUDA
struct CudaGraph::Impl {
  at::cuda::CUDAGraph graph;
  bool captured = false;
};
#else
struct CudaGraph::Impl {
  bool captured = false;
};
#endif

namespace {

// The legacy autograd profiler: CPU operators only (nested aten:: events with wall-clock spans), but
// present in every LibTorch build, including those without Kineto (Debian's).
void write_legacy_trace(const std::string& path, const std::function<void()>& fn) {
  torch::autograd::profiler::RecordProfile guard(path);
  fn();
}

}  // namespace

void write_profile_trace(const std::string& path, bool cuda, const std::function<void()>& fn) {
  {
    std::ofstream probe(path, std::ios::app);
    if (!probe) throw Error("profile", "cannot write '" + path + "'");
  }
#ifdef DIFFNET_HAVE_KINETO_PROFILER
  namespace tp = torch::profiler::impl;
  namespace ap = torch::autograd::profiler;
  const tp::ProfilerConfig config(tp::ProfilerState::KINETO);
  std::set<tp::ActivityType> activities{tp::ActivityType::CPU};
  if (cuda) activities.insert(tp::ActivityType::CUDA);
  ap::prepareProfiler(config, activities);
  ap::enableProfiler(config, activities);
  try {
    fn();
  } catch (...) {
    (void)ap::disableProfiler();
    throw;
  }
  auto result = ap::disableProfiler();
  try {
    result->save(path);
    return;
  } catch (const c10::Error& e) {  // e.g. a LibTorch built without Kineto (USE_KINETO=0) has no trace
    if (cuda)
      throw Error("profile", std::string("this LibTorch cannot write a profiler trace: ") + e.what_without_backtrace());
  }
#endif
  if (cuda) throw Error("profile", "this LibTorch has no usable Kineto profiler API (see the configure log); use --parts");
  // CPU without a Kineto trace: run the work (again, if Kineto ran it) under the legacy profiler.
  write_legacy_trace(path, fn);
}

CudaGraph::CudaGraph() : impl_(std::make_unique<Impl>()) {}
CudaGraph::~CudaGraph() = default;
bool CudaGraph::captured() const { return impl_->captured; }

void CudaGraph::capture(const std::function<void()>& fn, int warmup) {
#ifdef DIFFNET_WITH_CUDA
  if (impl_->captured) throw Error("CUDA graph", "already captured");
  // Capture must not run on the legacy default stream; warm-up on the same side stream lets cuDNN and
  // cuBLAS pick algorithms and workspaces before recording.
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false);
  side.synchronize();
  torch::cuda::synchronize();
  {
    c10::cuda::CUDAStreamGuard guard(side);
    for (int i = 0; i < warmup; ++i) fn();
    side.synchronize();
    impl_->graph.capture_begin();
    fn();
    impl_->graph.capture_end();
  }
  side.synchronize();
  impl_->captured = true;
#else
  (void)fn;
  (void)warmup;
  throw Error("CUDA graph", "this build has no CUDA (configure with -DDIFFNET_CUDA=ON)");
#endif
}

void CudaGraph::replay() {
  if (!impl_->captured) throw Error("CUDA graph", "replay() before capture()");
#ifdef DIFFNET_WITH_CUDA
  impl_->graph.replay();
#endif
}

}  // namespace diffnet
