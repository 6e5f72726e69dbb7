#include "acc/data/prefetcher.h"

#include "acc/util/error.h"

namespace acc::data {

Prefetcher::Prefetcher(int64_t count, std::function<Batch(int64_t)> produce, int depth)
    : count_(count), produce_(std::move(produce)), depth_(static_cast<size_t>(depth)) {
  ACC_CHECK(depth >= 1, "Prefetcher: depth must be >= 1, got ", depth);
  thread_ = std::thread([this] { run(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void Prefetcher::run() {
  for (int64_t i = 0; i < count_; ++i) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || ready_.size() < depth_; });
      if (stop_) return;
    }
    Batch batch;
    try {
      batch = produce_(i);
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      changed_.notify_all();
      return;
    }
    {
      std::lock_guard lock(mutex_);
      ready_.push_back(std::move(batch));
    }
    changed_.notify_all();
  }
}

Batch Prefetcher::next() {
  std::unique_lock lock(mutex_);
  ACC_CHECK(taken_ < count_, "Prefetcher::next: all ", count_, " batches were already taken");
  changed_.wait(lock, [&] { return !ready_.empty() || error_; });
  if (ready_.empty()) std::rethrow_exception(error_);
  Batch batch = std::move(ready_.front());
  ready_.pop_front();
  ++taken_;
  lock.unlock();
  changed_.notify_all();
  return batch;
}

}  // namespace acc::data
