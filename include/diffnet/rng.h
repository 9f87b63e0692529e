// Portable seeded randomness: xoshiro256** seeded through SplitMix64, with our own distributions
// (<random>'s are implementation-defined), so a seed gives the same numbers with any standard library.
// Used by the data pipeline (augmentation, sampling) and the synthetic generator.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace diffnet {

// One splitmix64 step: advances state and returns a well-mixed 64-bit value.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) {
    uint64_t s = seed;
    for (auto& w : s_) w = splitmix64(s);
  }
  // Independent stream for (seed, stream, index), e.g. the augmentation of global sample `index`: the three
  // words are mixed through SplitMix64 so nearby (stream, index) pairs give unrelated states.
  static Rng derive(uint64_t seed, uint64_t stream, uint64_t index) {
    uint64_t x = seed;
    const uint64_t a = splitmix64(x);
    x = a ^ (stream * 0xD1B54A32D192ED03ull);
    const uint64_t b = splitmix64(x);
    x = b ^ (index * 0x8CB92BA72F3D8DD7ull);
    return Rng(splitmix64(x));
  }
  // Next raw 64-bit value (xoshiro256**).
  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // Uniform in [a, b).
  double uniform(double a, double b) { return a + (b - a) * uniform(); }
  // Uniform integer in [lo, hi] (inclusive), unbiased (rejection sampling). lo > hi returns lo.
  int64_t randint(int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    uint64_t range = static_cast<uint64_t>(hi - lo) + 1;
    if (range == 0) return static_cast<int64_t>(next_u64());  // full 64-bit range
    uint64_t limit = UINT64_MAX - (UINT64_MAX % range);
    uint64_t v;
    do v = next_u64();
    while (v >= limit);
    return lo + static_cast<int64_t>(v % range);
  }
  bool bernoulli(double p) { return uniform() < p; }
  std::array<uint64_t, 4> state() const { return {s_[0], s_[1], s_[2], s_[3]}; }
  // Standard normal (Box-Muller, one value per call: no hidden state).
  double normal() {
    double u1 = (static_cast<double>(next_u64() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  double normal(double mean, double sd) { return mean + sd * normal(); }
  // Index drawn with probability proportional to weights[i] (non-negative; all zero -> uniform).
  size_t weighted(const std::vector<double>& weights) {
    double total = 0;
    for (double w : weights) total += w > 0 ? w : 0;
    if (weights.empty()) return 0;
    if (!(total > 0)) return static_cast<size_t>(randint(0, static_cast<int64_t>(weights.size()) - 1));
    double r = uniform() * total;
    for (size_t i = 0; i < weights.size(); ++i) {
      double w = weights[i] > 0 ? weights[i] : 0;
      if (r < w) return i;
      r -= w;
    }
    for (size_t i = weights.size(); i-- > 0;)
      if (weights[i] > 0) return i;
    return 0;
  }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(randint(0, static_cast<int64_t>(v.size()) - 1))];
  }
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      size_t j = static_cast<size_t>(randint(0, static_cast<int64_t>(i) - 1));
      std::swap(v[i - 1], v[j]);
    }
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace diffnet
