#pragma once
// Faulting fresh memory in on a second thread while the first one waits on the disk. On the
// VMs we run on, the first touch of an anonymous page costs about 0.3 s of CPU per GB; a
// reader filling new tensors from a file pays it on its own critical path (a resume's optimizer
// state: a third of a checkpoint load from the disk). Started before the reads, a Prefault
// thread makes the same pages present in order, without changing their contents, while the
// readers sleep in read().
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace acc::memory {

class Prefault {
 public:
  struct Region {
    void* data = nullptr;
    size_t bytes = 0;
  };
  // Starts faulting `regions` in, in the order given (the order they will be written in).
  // Anonymous memory only: a file-backed region would be read from its file first.
  explicit Prefault(std::vector<Region> regions);
  // Stops where it got to and waits for the thread.
  ~Prefault();
  Prefault(const Prefault&) = delete;
  Prefault& operator=(const Prefault&) = delete;

  // Bytes made present so far (a test's window into the thread).
  size_t done() const { return done_.load(std::memory_order_relaxed); }

 private:
  void run(const std::vector<Region>& regions);

  std::atomic<bool> stop_{false};
  std::atomic<size_t> done_{0};
  std::thread thread_;
};

}  // namespace acc::memory
