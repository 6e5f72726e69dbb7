#include "support/random_tokens.h"

#include <vector>

namespace acc::bench {

data::Batch RandomTokens::get_batch(std::span<const int64_t> idx, const data::EpochKey&) const {
  const int64_t b = static_cast<int64_t>(idx.size());
  std::vector<int32_t> ids(static_cast<size_t>(b * seq_)), labels(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>((i * 2654435761u + static_cast<uint64_t>(idx[0])) %
                                  static_cast<uint64_t>(vocab_));
    labels[i] = static_cast<int32_t>((i * 40503u + 7) % static_cast<uint64_t>(vocab_));
  }
  data::Batch batch;
  batch.set("input_ids", Tensor::from_vector_i32(ids, {b, seq_}));
  batch.set("labels", Tensor::from_vector_i32(labels, {b, seq_}));
  return batch;
}

}  // namespace acc::bench
