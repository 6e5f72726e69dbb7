#pragma once
// Produces batches 0..count-1 on a background thread, at most `depth` ahead of the consumer.
// next() hands them out in order; an exception thrown by the producer is rethrown by next()
// once the batches produced before it are consumed. Destruction stops and joins the thread
// even when the consumer stopped early.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "acc/data/dataset.h"

namespace acc::data {

class Prefetcher {
 public:
  Prefetcher(int64_t count, std::function<Batch(int64_t)> produce, int depth);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  Batch next();

 private:
  void run();

  const int64_t count_;
  const std::function<Batch(int64_t)> produce_;
  const size_t depth_;
  std::mutex mutex_;
  std::condition_variable changed_;  // signalled on push, pop, error and stop
  std::deque<Batch> ready_;
  std::exception_ptr error_;
  int64_t taken_ = 0;
  bool stop_ = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace acc::data
