#include "acc/tensor/random.h"

#include <tbb/parallel_for.h>

#include <cmath>
#include <numbers>
#include <utility>

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

// The two standard normals of pair k of the stream, elements 2k and 2k + 1: Box-Muller on one
// 64-bit draw, 24 bits for the radius and 24 for the angle, in float. One log, one square root
// and one sine-and-cosine give two values (a double log and cosine per value before: 2.8x slower).
std::pair<float, float> normal_pair(uint64_t key, uint64_t k) {
  const uint64_t b = bits(key, k);
  const float u1 = (static_cast<float>(b >> 40) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]: a finite log
  const float u2 = static_cast<float>((b >> 8) & 0xffffffULL) * (1.0f / 16777216.0f);
  const float r = std::sqrt(-2.0f * std::log(u1));
  const float angle = 2.0f * std::numbers::pi_v<float> * u2;
  return {r * std::cos(angle), r * std::sin(angle)};
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
  const auto [even, odd] = normal_pair(key, index >> 1);
  return index & 1 ? odd : even;
}

void fill_normal(float* dst, int64_t begin, int64_t count, uint64_t key, float mean, float std) {
  if (count <= 0) return;
  // By pairs: element 2k + j of the stream goes to dst[2k + j - begin] when that is in range.
  const int64_t first = begin >> 1, last = (begin + count - 1) >> 1;
  tbb::parallel_for(tbb::blocked_range<int64_t>(first, last + 1, 1 << 13), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t k = r.begin(); k < r.end(); ++k) {
      const auto [even, odd] = normal_pair(key, static_cast<uint64_t>(k));
      const int64_t i = 2 * k - begin;
      if (i >= 0) dst[i] = mean + std * even;
      if (i + 1 < count) dst[i + 1] = mean + std * odd;
    }
  });
}

void fill_uniform(float* dst, int64_t begin, int64_t count, uint64_t key, float low, float high) {
  parallel_fill(dst, count, [&](int64_t i) { return low + (high - low) * uniform(key, begin + i); });
}

}  // namespace acc::random
