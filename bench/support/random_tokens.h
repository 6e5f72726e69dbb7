#pragma once
// Token batches from a fixed hash: what the model benchmarks train on (the numbers do not
// depend on the data; only that every run and rank sees the same batches).
#include <cstdint>

#include "acc/data/dataset.h"

namespace acc::bench {

class RandomTokens final : public data::Dataset {
 public:
  RandomTokens(int64_t n, int64_t seq, int64_t vocab) : n_(n), seq_(seq), vocab_(vocab) {}
  int64_t size() const override { return n_; }
  data::Batch get_batch(std::span<const int64_t> idx, const data::EpochKey&) const override;

 private:
  int64_t n_, seq_, vocab_;
};

}  // namespace acc::bench
