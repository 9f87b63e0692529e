// xoshiro256** with SplitMix64 seeding, and the distributions the data pipeline needs.
#include "diffnet/data.h"

namespace diffnet {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (auto& s : s_) s = splitmix64(x);
}

Rng Rng::derive(uint64_t seed, uint64_t stream, uint64_t index) {
  // Mix the three words through SplitMix64 so nearby (stream, index) pairs give unrelated states.
  uint64_t x = seed;
  uint64_t a = splitmix64(x);
  x = a ^ (stream * 0xD1B54A32D192ED03ull);
  uint64_t b = splitmix64(x);
  x = b ^ (index * 0x8CB92BA72F3D8DD7ull);
  return Rng(splitmix64(x));
}

uint64_t Rng::next_u64() {
  uint64_t result = rotl(s_[1] * 5, 7) * 9;
  uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

int64_t Rng::randint(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  uint64_t range = static_cast<uint64_t>(hi - lo) + 1;  // 0 means the full 2^64 range
  if (range == 0) return static_cast<int64_t>(next_u64());
  // Rejection sampling on the top of the 64-bit range: exact uniformity.
  uint64_t limit = UINT64_MAX - (UINT64_MAX % range);
  uint64_t r;
  do {
    r = next_u64();
  } while (r >= limit);
  return lo + static_cast<int64_t>(r % range);
}

}  // namespace diffnet
