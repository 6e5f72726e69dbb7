#include "acc/data/shuffle.h"

#include <numeric>
#include <string>
#include <utility>

#include "acc/tensor/random.h"

namespace acc::data {

std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  const uint64_t key = random::stream_key(seed, "acc.data.shuffle/" + std::to_string(epoch));
  // Step i swaps element i with one of [0, i]; 64 random bits modulo (i+1) has a bias below
  // 2^-24 for any dataset under 2^40 samples.
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(random::bits(key, static_cast<uint64_t>(i)) %
                                        static_cast<uint64_t>(i + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

}  // namespace acc::data
