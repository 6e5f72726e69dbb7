#pragma once
// The sample order of a shuffled epoch: a Fisher-Yates permutation whose swap choices come from
// acc's counter RNG stream ("acc.data.shuffle/<epoch>", seed), so the same (n, seed, epoch)
// gives the same order on every machine and every rank, without communication.
#include <cstdint>
#include <vector>

namespace acc::data {

std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace acc::data
