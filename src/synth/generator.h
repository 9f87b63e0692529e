// One synthetic sample, in memory (the run loop in generator.cpp writes them): source page ->
// scale/crop -> print-scan -> JPEG q1 -> pristine -> edits -> output format.
#pragma once

#include <mutex>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "diffnet/synth.h"
#include "synth/layouts.h"
#include "synth/ops.h"
#include "synth/sources.h"

namespace diffnet::synth {

// Options resolved once per run.
struct Plan {
  SynthOptions opt;
  OpWeights weights{};
  std::vector<LayoutKind> layouts;
  std::vector<FontFace> fonts;
  std::vector<SourceFile> sources;
  std::vector<size_t> order;  // seeded permutation of sources
  EditConfig edit;
};
Plan make_plan(const SynthOptions& opt);  // validates options; throws Error naming the option

// Sources found unusable (shared by the worker threads; first report prints a warning).
class BadSources {
 public:
  bool is_bad(size_t i);
  void report(size_t i, const std::string& path, const std::string& reason, bool quiet);
  std::vector<std::pair<std::string, std::string>> list();

 private:
  std::mutex m_;
  std::map<size_t, std::pair<std::string, std::string>> bad_;
};

struct Sample {
  nlohmann::json record;  // manifest line (without file names)
  Raster image, mask, pristine;
  bool jpeg = false;
  int quality = 0;
  std::map<std::string, double> seconds;  // stage timings
};

// Builds sample `index`. Throws Error when no source is usable.
Sample make_sample(const Plan& plan, int64_t index, BadSources& bad);

}  // namespace diffnet::synth
