#pragma once
// acc::dist::Work: the handle of one asynchronous communication. Backends complete it from
// their own thread; the user thread waits on it. A failure in the backend (timeout, peer lost)
// is stored in the Work and thrown at wait(), so errors surface where the result is needed.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "acc/distributed/collective_signature.h"
#include "acc/tensor/tensor.h"

namespace acc::dist {

class Work {
 public:
  explicit Work(std::string description, std::optional<CollectiveSignature> signature = std::nullopt)
      : description_(std::move(description)), signature_(signature) {}
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // What this work is, e.g. "all_gather #12 on group 'world' (ranks [0, 1])".
  const std::string& description() const { return description_; }
  // The collective this work is, for backends to compare with the peers' (none for point to
  // point and a backend's own work).
  const std::optional<CollectiveSignature>& signature() const { return signature_; }
  // True once done or failed; for a backend that completes works on the caller's thread (see
  // set_poll), asking also moves the work along.
  bool is_completed() const;
  // Blocks until done. Throws acc::Error with the backend's message if the work failed, or if
  // `timeout` is given and passes first (the work itself then keeps running in the backend,
  // which enforces ACC_COMM_TIMEOUT on its own).
  void wait(std::optional<std::chrono::duration<double>> timeout = std::nullopt);

  // Keeps the tensors a backend reads or writes alive until wait() has seen the work finish, or
  // until the work itself goes (the backend holds it until it is done). A caller may therefore
  // drop its handles to a buffer right after issuing the collective.
  void hold(std::vector<Tensor> tensors);

  // Backend side: lets the thread that waits run the operation itself instead of handing it
  // to the backend's thread and sleeping until it is done (a blocking collective then costs no
  // thread switches). wait() calls the runner once before it blocks; the runner either
  // completes the work or declines (returns without doing anything). Dropped once done.
  void set_runner(std::function<void()> runner);
  // Backend side, for a work that nothing completes in the background (a point-to-point message
  // through shared memory): is_completed() calls `poll` while the work is not done, and `poll`
  // completes it if it can, without blocking. Dropped once done.
  void set_poll(std::function<void()> poll);

  // The bytes this rank sends for it under a ring schedule (dist::traffic() counts them): what
  // a simulated cross-node link paces the collective by. Set when the collective is issued.
  uint64_t wire_bytes() const { return wire_bytes_; }
  void set_wire_bytes(uint64_t bytes) { wire_bytes_ = bytes; }

  // Backend side: exactly one of these is called, once.
  void mark_done();
  void mark_failed(std::string message);

  // A work that is already finished (single-process group, empty transfers).
  static std::shared_ptr<Work> completed(std::string description);

 private:
  std::string description_;
  std::optional<CollectiveSignature> signature_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::atomic<bool> finished_{false};  // done_, readable without the lock (wait's spin)
  std::string error_;  // non-empty once failed
  std::vector<Tensor> held_;
  std::function<void()> runner_;
  std::function<void()> poll_;
  uint64_t wire_bytes_ = 0;
};

}  // namespace acc::dist
