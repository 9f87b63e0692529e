// The timing loop the operator benchmarks share (`diffnet bench --op depthwise|grn`).
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "diffnet/common.h"

namespace diffnet::ops {

// step(false) runs LibTorch's way, step(true) ours; each returns its milliseconds. One warm-up of each,
// then `iters` rounds that alternate the two (a busy machine slows both alike); their medians.
inline std::pair<double, double> alternated_medians(int iters, const std::function<double(bool)>& step) {
  step(false);
  step(true);
  std::vector<double> base, own;
  for (int i = 0; i < iters; ++i) {
    base.push_back(step(false));
    own.push_back(step(true));
  }
  return {median(base), median(own)};
}

}  // namespace diffnet::ops
