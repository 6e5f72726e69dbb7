#pragma once
// Counter-based random numbers: element i of the stream (seed, name) is a pure function of
// (seed, hash(name), i). A rank that owns elements [begin, begin+count) of a parameter can
// therefore initialise exactly its shard and get the values the full tensor would have.
#include <cstdint>
#include <string_view>

namespace acc::random {

uint64_t stream_key(uint64_t seed, std::string_view name);
// 64 well-mixed bits for element `index` of the stream `key`.
uint64_t bits(uint64_t key, uint64_t index);
// Uniform in [0, 1) and standard normal for element `index` (elements 2k and 2k + 1 are the
// two values of one Box-Muller draw; fill_normal computes them together).
float uniform(uint64_t key, uint64_t index);
float normal(uint64_t key, uint64_t index);

// Fills dst[0, count) with elements [begin, begin+count) of the stream (parallel).
void fill_normal(float* dst, int64_t begin, int64_t count, uint64_t key, float mean, float std);
void fill_uniform(float* dst, int64_t begin, int64_t count, uint64_t key, float low, float high);

}  // namespace acc::random
