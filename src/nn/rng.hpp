// rng.hpp — deterministic, platform-independent random numbers for the network:
// splitmix64 mixing, a counter-based hash (dropout masks), and the seeded uniform
// generator used by parameter initialisation. Never std:: distributions (their output
// is implementation-defined).
#pragma once
#include <cstdint>
#include <string_view>

// Functions marked CNNSCALE_HD are also compiled for the device (dropout masks are
// generated on the GPU with the very same hash as on the CPU).
#ifdef __CUDACC__
#define CNNSCALE_HD __host__ __device__
#else
#define CNNSCALE_HD
#endif

namespace cnnscale::nn {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// The splitmix64 finaliser: a bijective 64-bit mix with good avalanche.
CNNSCALE_HD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Hash of an ordered tuple of integers (counter-based: no state, no stream).
CNNSCALE_HD inline uint64_t hash_combine(uint64_t h, uint64_t v) { return mix64(h + kGolden + mix64(v)); }

// FNV-1a of a string (used to give each parameter its own init stream).
inline uint64_t hash_string(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// splitmix64 generator; uniform() returns a double in [0, 1) with 53 random bits.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_ += kGolden); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi) computed in double, then rounded to float by the caller.
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

 private:
  uint64_t state_;
};

}  // namespace cnnscale::nn
