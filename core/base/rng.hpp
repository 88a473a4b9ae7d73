// Deterministic random numbers that do not depend on the standard library's
// distributions (which differ between implementations) nor on the device:
// a weight or dropout mask drawn from a seed is the same on CPU, GPU and any platform.
#pragma once
#include <cmath>
#include <cstdint>

namespace distrain {

constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Derives an independent seed for a named stream (a variable, an epoch, a step).
constexpr uint64_t derive_seed(uint64_t seed, uint64_t stream) { return splitmix64(seed ^ splitmix64(stream + 0x632be59bd9b4e019ULL)); }

// Counter-based uniform in [0, 1): element i of the stream `seed`. Usable from any thread or kernel.
constexpr float uniform_at(uint64_t seed, uint64_t i) {
  return static_cast<float>(splitmix64(seed ^ (i * 0xd1b54a32d192ed03ULL)) >> 40) * (1.0f / 16777216.0f);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() { return splitmix64(state_++); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal by Box-Muller (no cached second value, so the stream position is simple).
  double normal() {
    double u1 = uniform();
    double u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return next_u64() % n; }

 private:
  uint64_t state_;
};

}  // namespace distrain
