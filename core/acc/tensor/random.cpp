#include "acc/tensor/random.h"

#include <tbb/parallel_for.h>

#include <cmath>
#include <numbers>

namespace acc::random {
namespace {

// splitmix64's finaliser: a bijective mixer with full avalanche.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <class Fn>
void parallel_fill(float* dst, int64_t count, Fn&& fn) {
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, count, 1 << 14),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      for (int64_t i = r.begin(); i < r.end(); ++i) dst[i] = fn(i);
                    });
}

}  // namespace

uint64_t stream_key(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the name
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ULL;
  return mix(seed ^ mix(h));
}

uint64_t bits(uint64_t key, uint64_t index) { return mix(key + mix(index + 0x9e3779b97f4a7c15ULL)); }

float uniform(uint64_t key, uint64_t index) {
  return static_cast<float>(bits(key, index) >> 40) * (1.0f / 16777216.0f);  // 24 bits
}

float normal(uint64_t key, uint64_t index) {
  // Box-Muller on the two 32-bit halves of one draw; u1 in (0, 1] so the log is finite.
  const uint64_t b = bits(key, index);
  const double u1 = (static_cast<double>(b >> 32) + 1.0) / 4294967296.0;
  const double u2 = static_cast<double>(b & 0xffffffffULL) / 4294967296.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

void fill_normal(float* dst, int64_t begin, int64_t count, uint64_t key, float mean, float std) {
  parallel_fill(dst, count, [&](int64_t i) { return mean + std * normal(key, begin + i); });
}

void fill_uniform(float* dst, int64_t begin, int64_t count, uint64_t key, float low, float high) {
  parallel_fill(dst, count, [&](int64_t i) { return low + (high - low) * uniform(key, begin + i); });
}

}  // namespace acc::random
