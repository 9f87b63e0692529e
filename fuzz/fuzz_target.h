// One fuzz target per file (fuzz/fuzz_<name>.cpp), written once against this header:
//   DIFFNET_FUZZ_TARGET(name) { ... use data, size ... }
// With -DDIFFNET_LIBFUZZER (clang -fsanitize=fuzzer: `make fuzz`) it defines LLVMFuzzerTestOneInput;
// otherwise it registers the target with the corpus replay (fuzz/replay_main.cpp, ctest `fuzz_replay`).
// The body may throw std::exception (diffnet::Error and the like): the expected failures, swallowed here.
// Anything else (a crash, an abort, a sanitizer report, another exception type) is a finding.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace diffnet::fuzz {

using TargetFn = void (*)(const uint8_t* data, size_t size);

// Single-threaded ATen/OpenMP: fuzzing runs one input at a time, and threads only add noise.
inline void init_once() {
  static const bool done = [] {
    at::set_num_threads(1);
    return true;
  }();
  (void)done;
}

inline int run_one(TargetFn fn, const uint8_t* data, size_t size) {
  init_once();
  try {
    fn(data, size);
  } catch (const std::exception&) {
    // Expected: bad input reported as an exception (diffnet::Error for our own checks).
  }
  return 0;
}

// The input cut at every occurrence of sep (so a target can take several fields from one input).
inline std::vector<std::string> split(const uint8_t* data, size_t size, const std::string& sep) {
  std::vector<std::string> out;
  const char* p = reinterpret_cast<const char*>(data);
  const char* end = p + size;
  while (true) {
    const char* hit = std::search(p, end, sep.begin(), sep.end());
    out.emplace_back(p, hit);
    if (hit == end) break;
    p = hit + sep.size();
  }
  return out;
}

inline std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

#ifndef DIFFNET_LIBFUZZER
struct Target {
  const char* name;
  TargetFn fn;
};
inline std::vector<Target>& registry() {
  static std::vector<Target> targets;
  return targets;
}
struct Registrar {
  Registrar(const char* name, TargetFn fn) { registry().push_back({name, fn}); }
};
#endif

}  // namespace diffnet::fuzz

#ifdef DIFFNET_LIBFUZZER
#define DIFFNET_FUZZ_TARGET(name)                                                     \
  static void diffnet_fuzz_##name(const uint8_t* data, size_t size);                  \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {           \
    return diffnet::fuzz::run_one(diffnet_fuzz_##name, data, size);                   \
  }                                                                                   \
  static void diffnet_fuzz_##name(const uint8_t* data, size_t size)
#else
#define DIFFNET_FUZZ_TARGET(name)                                                     \
  static void diffnet_fuzz_##name(const uint8_t* data, size_t size);                  \
  static const diffnet::fuzz::Registrar diffnet_fuzz_registrar_##name(#name, diffnet_fuzz_##name); \
  static void diffnet_fuzz_##name(const uint8_t* data, size_t size)
#endif
