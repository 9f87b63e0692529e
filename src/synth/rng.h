// Seeds of the synthetic generator: sample `index` (and stream) seeds derived from the run seed only.
// The generator (diffnet::Rng) is the project's one (diffnet/rng.h).
#pragma once

#include <cstdint>

#include "diffnet/rng.h"

namespace diffnet::synth {

using diffnet::Rng;
using diffnet::splitmix64;

// Seed of sample `index` (and of an independent `stream` within it) derived from the run seed only,
// so that samples can be generated in any order or in parallel with identical results.
inline uint64_t derive_seed(uint64_t seed, uint64_t index, uint64_t stream = 0) {
  uint64_t s = seed ^ 0x5DEECE66Dull;
  uint64_t a = splitmix64(s);
  s = a ^ (index * 0xD1B54A32D192ED03ull);
  uint64_t b = splitmix64(s);
  s = b ^ (stream * 0x8CB92BA72F3D8DD7ull + 0x1234567ull);
  return splitmix64(s);
}

}  // namespace diffnet::synth
