#include "acc/dist/work.h"

#include "acc/util/error.h"

namespace acc::dist {

bool Work::is_completed() const {
  std::lock_guard lock(mutex_);
  return done_;
}

void Work::wait(std::optional<std::chrono::duration<double>> timeout) {
  std::unique_lock lock(mutex_);
  if (timeout) {
    const bool finished = cv_.wait_for(lock, *timeout, [&] { return done_; });
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

void Work::mark_done() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
}

void Work::mark_failed(std::string message) {
  {
    std::lock_guard lock(mutex_);
    error_ = message.empty() ? description_ + ": failed" : std::move(message);
    done_ = true;
  }
  cv_.notify_all();
}

std::shared_ptr<Work> Work::completed(std::string description) {
  auto work = std::make_shared<Work>(std::move(description));
  work->mark_done();
  return work;
}

}  // namespace acc::dist
