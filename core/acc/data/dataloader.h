#pragma once
// DataLoader: batches of a Dataset for a training loop, `for (auto& batch : loader)`.
//
// batch_size is the GLOBAL batch: with {rank, world} set (accelerate() does this), each epoch
// is cut into global batches of batch_size samples and rank r gets the r-th of `world` equal,
// contiguous slices of each, so the ranks together see every global batch exactly once.
// Shuffling permutes the samples by (seed, epoch) — identical on every rank and machine; call
// set_epoch(e) before each epoch to get a new order (as with PyTorch's DistributedSampler).
// A background thread prepares up to `prefetch` batches ahead of the loop.
#include <concepts>
#include <cstdint>
#include <iterator>
#include <memory>
#include <type_traits>
#include <vector>

#include "acc/data/dataset.h"

namespace acc::data {

struct LoaderOptions {
  int64_t batch_size = 1;  // global batch: the sum over all ranks
  bool shuffle = false;
  // Without drop_last the final, smaller batch is kept and split as evenly as the ranks allow
  // (rank r gets rows [L*r/world, L*(r+1)/world) of a last batch of L samples).
  bool drop_last = false;
  uint64_t seed = 0;
  int prefetch = 2;  // batches prepared ahead on a background thread; 0 = on the caller's thread
  int rank = 0;
  int world = 1;
};

class DataLoader {
  class EpochRun;

 public:
  // Takes a dataset by value (DataLoader(TokenFile(...), {...})) or shared.
  template <class D>
    requires std::derived_from<std::decay_t<D>, Dataset>
  DataLoader(D&& dataset, LoaderOptions options = {})
      : DataLoader(std::make_shared<const std::decay_t<D>>(std::forward<D>(dataset)), options) {}
  DataLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options = {});

  // The same loader restricted to rank `rank` of `world` (batch_size must divide by world).
  DataLoader for_rank(int rank, int world) const;

  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  const LoaderOptions& options() const { return options_; }
  const Dataset& dataset() const { return *dataset_; }
  // Steps per epoch (the same on every rank).
  int64_t size() const;
  // This rank's sample indices for step `step` of the current epoch.
  std::vector<int64_t> batch_indices(int64_t step) const;

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;

    Iterator() = default;
    explicit Iterator(std::shared_ptr<EpochRun> run);
    Batch& operator*() const;
    Batch* operator->() const { return &**this; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const;

   private:
    std::shared_ptr<EpochRun> run_;
  };

  // Starts a pass over the current epoch; a new begin() starts a new pass.
  Iterator begin() const { return begin_at(0); }
  // Starts it at batch `step` (a resumed run continues where the saved one stopped): the same
  // batches the uninterrupted pass would have yielded from there.
  Iterator begin_at(int64_t step) const;
  std::default_sentinel_t end() const { return {}; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions options_;
  int64_t epoch_ = 0;
};

}  // namespace acc::data
