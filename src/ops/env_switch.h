// The A/B switch of our CPU operators: $DIFFNET_DEPTHWISE, $DIFFNET_DWLN, $DIFFNET_GRN, $DIFFNET_GELU_GRN,
// $DIFFNET_GELU, $DIFFNET_EMBEDDING = aten | ours.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

#include "diffnet/common.h"

namespace diffnet::ops {

// True when the environment variable `name` is "aten" (LibTorch's own code); false when it is unset,
// empty or "ours"; any other value is an Error naming the variable. Callers cache the answer.
inline bool env_says_aten(const char* name) {
  const char* env = std::getenv(name);
  if (!env || !*env || std::strcmp(env, "ours") == 0) return false;
  if (std::strcmp(env, "aten") == 0) return true;
  throw Error(name, std::string("'") + env + "' is not aten or ours");
}

}  // namespace diffnet::ops
