#include "acc/data/dataloader.h"

#include <numeric>
#include <optional>

#include "acc/data/prefetcher.h"
#include "acc/data/shuffle.h"
#include "acc/util/error.h"

namespace acc::data {

namespace {

void check_options(const LoaderOptions& o) {
  ACC_CHECK(o.batch_size >= 1, "DataLoader: batch_size must be >= 1, got ", o.batch_size);
  ACC_CHECK(o.world >= 1, "DataLoader: world must be >= 1, got ", o.world);
  ACC_CHECK(o.rank >= 0 && o.rank < o.world, "DataLoader: rank ", o.rank, " is outside [0, ",
            o.world, ")");
  ACC_CHECK(o.batch_size % o.world == 0, "DataLoader: global batch_size ", o.batch_size,
            " does not divide evenly over ", o.world, " ranks (expected a multiple of ", o.world,
            ")");
  ACC_CHECK(o.prefetch >= 0, "DataLoader: prefetch must be >= 0, got ", o.prefetch);
}

int64_t steps_for(int64_t n, const LoaderOptions& o) {
  return o.drop_last ? n / o.batch_size : (n + o.batch_size - 1) / o.batch_size;
}

std::vector<int64_t> epoch_order(int64_t n, const LoaderOptions& o, int64_t epoch) {
  if (o.shuffle) return shuffled_order(n, o.seed, epoch);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

// Rank `o.rank`'s contiguous share of global batch `step` (see LoaderOptions::drop_last).
std::vector<int64_t> rank_slice(const std::vector<int64_t>& order, int64_t step,
                                const LoaderOptions& o) {
  const auto n = static_cast<int64_t>(order.size());
  const int64_t first = step * o.batch_size;
  const int64_t len = std::min(o.batch_size, n - first);
  const int64_t begin = first + len * o.rank / o.world;
  const int64_t end = first + len * (o.rank + 1) / o.world;
  return {order.begin() + begin, order.begin() + end};
}

}  // namespace

// One pass over an epoch: the sample order, the current batch and (optionally) the prefetcher.
class DataLoader::EpochRun {
 public:
  EpochRun(std::shared_ptr<const Dataset> dataset, const LoaderOptions& options, int64_t epoch,
           int64_t first)
      : dataset_(std::move(dataset)),
        options_(options),
        key_{options.seed, epoch},
        order_(epoch_order(dataset_->size(), options, epoch)),
        steps_(steps_for(dataset_->size(), options)),
        step_(first) {
    if (options_.prefetch > 0 && steps_ > first)
      prefetcher_.emplace(steps_ - first, [this, first](int64_t k) { return produce(first + k); },
                          options_.prefetch);
    advance();
  }

  bool done() const { return step_ > steps_; }
  Batch& current() {
    ACC_CHECK(!done(), "DataLoader: dereferencing an iterator past the end of the epoch");
    return current_;
  }
  void advance() {
    ++step_;
    if (done()) return;
    current_ = prefetcher_ ? prefetcher_->next() : produce(step_ - 1);
  }

 private:
  Batch produce(int64_t step) const {
    const auto indices = rank_slice(order_, step, options_);
    return dataset_->get_batch(indices, key_);
  }

  const std::shared_ptr<const Dataset> dataset_;
  const LoaderOptions options_;
  const EpochKey key_;
  const std::vector<int64_t> order_;
  const int64_t steps_;
  int64_t step_;  // 1-based index of current_; steps_+1 once the epoch is over
  Batch current_;
  std::optional<Prefetcher> prefetcher_;  // last: its thread reads the members above
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  ACC_CHECK(dataset_ != nullptr, "DataLoader: dataset is null");
  check_options(options_);
}

DataLoader DataLoader::for_rank(int rank, int world) const {
  LoaderOptions o = options_;
  o.rank = rank;
  o.world = world;
  DataLoader copy(dataset_, o);
  copy.epoch_ = epoch_;
  return copy;
}

int64_t DataLoader::size() const { return steps_for(dataset_->size(), options_); }

std::vector<int64_t> DataLoader::batch_indices(int64_t step) const {
  ACC_CHECK(step >= 0 && step < size(), "DataLoader::batch_indices: step ", step,
            " is outside [0, ", size(), ")");
  return rank_slice(epoch_order(dataset_->size(), options_, epoch_), step, options_);
}

DataLoader::Iterator DataLoader::begin_at(int64_t step) const {
  ACC_CHECK(step >= 0 && step <= size(), "DataLoader::begin_at: step ", step, " is outside [0, ",
            size(), "] for an epoch of ", size(), " batches");
  return Iterator(std::make_shared<EpochRun>(dataset_, options_, epoch_, step));
}

DataLoader::Iterator::Iterator(std::shared_ptr<EpochRun> run) : run_(std::move(run)) {}

Batch& DataLoader::Iterator::operator*() const {
  ACC_CHECK(run_ != nullptr, "DataLoader: dereferencing an empty iterator");
  return run_->current();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ACC_CHECK(run_ != nullptr, "DataLoader: incrementing an empty iterator");
  run_->advance();
  return *this;
}

bool DataLoader::Iterator::operator==(std::default_sentinel_t) const {
  return run_ == nullptr || run_->done();
}

}  // namespace acc::data
