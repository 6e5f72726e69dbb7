#include "acc/distributed/work.h"

#include <algorithm>
#include <thread>

#include "acc/util/error.h"
#include "acc/util/profiler.h"

namespace acc::dist {

namespace {
constexpr std::chrono::microseconds kSpinBeforeSleep{20};
}  // namespace

bool Work::is_completed() const {
  std::function<void()> poll;
  {
    std::lock_guard lock(mutex_);
    if (done_) return true;
    poll = poll_;  // a copy: mark_done() may drop poll_ while it runs
  }
  if (!poll) return false;
  poll();
  return finished_.load(std::memory_order_acquire);
}

void Work::wait(std::optional<std::chrono::duration<double>> timeout) {
  ACC_PROFILE("comm.wait");  // communication the caller was exposed to (not hidden by compute)
  std::function<void()> runner;  // not with a timeout: the runner takes as long as the work
  if (!timeout) {
    std::lock_guard lock(mutex_);
    if (!done_) runner.swap(runner_);
  }
  if (runner) runner();
  // A collective often completes within microseconds: poll briefly before sleeping, since
  // waking a sleeping thread costs several microseconds here.
  const auto spin_until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
  while (!finished_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < spin_until)
    std::this_thread::yield();
  std::unique_lock lock(mutex_);
  if (timeout) {
    // A work only its poll moves along is polled while waiting (each slice a millisecond).
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(*timeout);
    bool finished = done_;
    while (!finished && std::chrono::steady_clock::now() < deadline) {
      if (std::function<void()> poll = poll_) {
        lock.unlock();
        poll();
        lock.lock();
      }
      finished = cv_.wait_for(lock, std::min<std::chrono::steady_clock::duration>(
                                        std::chrono::milliseconds(1), deadline - std::chrono::steady_clock::now()),
                              [&] { return done_; });
    }
    ACC_CHECK(finished, description_, ": wait() gave up after ", timeout->count(),
              " s; the operation has not completed");
  } else {
    cv_.wait(lock, [&] { return done_; });
  }
  if (!error_.empty()) throw Error(error_);
  held_.clear();
}

void Work::hold(std::vector<Tensor> tensors) {
  std::lock_guard lock(mutex_);
  for (auto& t : tensors) held_.push_back(std::move(t));
}

void Work::set_runner(std::function<void()> runner) {
  std::lock_guard lock(mutex_);
  if (!done_) runner_ = std::move(runner);
}

void Work::set_poll(std::function<void()> poll) {
  std::lock_guard lock(mutex_);
  if (!done_) poll_ = std::move(poll);
}

void Work::mark_done() {
  std::function<void()> runner, poll;  // released outside the lock: they may own backend state
  {
    std::lock_guard lock(mutex_);
    runner.swap(runner_);
    poll.swap(poll_);
    done_ = true;
    finished_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void Work::mark_failed(std::string message) {
  std::function<void()> runner, poll;
  {
    std::lock_guard lock(mutex_);
    runner.swap(runner_);
    poll.swap(poll_);
    error_ = message.empty() ? description_ + ": failed" : std::move(message);
    done_ = true;
    finished_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

std::shared_ptr<Work> Work::completed(std::string description) {
  auto work = std::make_shared<Work>(std::move(description));
  work->mark_done();
  return work;
}

}  // namespace acc::dist
