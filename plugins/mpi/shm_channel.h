#pragma once
// A shared-memory channel for a process group whose ranks all live on this node. Every rank
// owns kBuffers staging buffers in one POSIX shared-memory segment, and two counters in the
// segment tell the others how far it has come:
//   published(r): the steps whose buffer rank r has filled (step s uses buffer s % kBuffers);
//   consumed(r):  the steps in which rank r has finished reading every peer's buffer.
// Steps are numbered across all collectives of the group, which every rank issues in the same
// order with the same step counts, so the counters never need resetting. Before a collective
// moves data, each rank posts its signature (dist/collective_signature.h) in one of two slots and
// raises a third counter, entered(r), so its peers can compare (signature_check.h). Two slots
// suffice: a rank enters collective c + 2 only after every peer has taken part in c + 1, and so
// has finished reading the signatures of c.
//
// Why: over MPI messages, reduce_scatter of large buffers reached only ~0.5x memcpy (the
// numbers are in docs/launch.md). Collectives over the channel (shm_schedule.h) stage each
// step's piece through a buffer small enough to stay in cache between writer and readers, so a
// byte costs about one memory read and one write.
//
// The segment is created by the group's rank 0, mapped by the others and unlinked as soon as
// every rank has mapped it, so nothing is left in /dev/shm when a job dies.
#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "acc/distributed/collective_signature.h"
#include "acc/distributed/staging_copy.h"

namespace acc::mpi {

class ShmChannel {
 public:
  static constexpr int kBuffers = 2;

  // Collective over comm, blocking; call on the comm thread. Null (and MPI messages are used
  // instead) when the ranks of comm are not all on one node, when ACC_SHM=0, or when the
  // segment cannot be made on some rank (the reason is logged).
  static std::unique_ptr<ShmChannel> create(MPI_Comm comm);
  ~ShmChannel();
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Bytes of one staging buffer (a multiple of 64).
  size_t buffer_bytes() const { return buffer_bytes_; }
  char* buffer(int r, uint64_t step) const;
  // Copies into this rank's staging buffer, with stores chosen for where the readers are
  // (dist::StagingCopy). Only the thread running the group's current collective calls it.
  // `keep`: a second destination, as in dist::StagingCopy.
  void stage(char* buffer, const void* src, size_t bytes, void* keep = nullptr, bool keep_streaming = false) {
    stage_copy_(buffer, src, bytes, keep, keep_streaming);
  }

  void publish(uint64_t steps) { counters(rank_).published.store(steps, std::memory_order_release); }
  void consume(uint64_t steps) { counters(rank_).consumed.store(steps, std::memory_order_release); }

  // The peers (group ranks) that have not yet published `steps` steps / consumed `steps` steps.
  std::vector<int> not_published(uint64_t steps) const { return behind(&Counters::published, steps); }
  std::vector<int> not_consumed(uint64_t steps) const { return behind(&Counters::consumed, steps); }

  // Posts this rank's signature for the collective it enters now; returns the collective's
  // number (counted from 1). Only the thread running the group's current collective calls it.
  uint64_t enter(const dist::CollectiveSignature& signature);
  // The peers that have not yet entered collective `number`, and a peer's signature for it.
  std::vector<int> not_entered(uint64_t number) const { return behind(&Counters::entered, number); }
  const dist::CollectiveSignature& signature(int r, uint64_t number) const {
    return counters(r).signatures[number % 2];
  }

  // Reserves `count` steps for a collective that is starting; returns the first.
  uint64_t reserve_steps(uint64_t count) {
    const uint64_t first = next_step_;
    next_step_ += count;
    return first;
  }

 private:
  struct alignas(64) Counters {
    std::atomic<uint64_t> published{0};
    alignas(64) std::atomic<uint64_t> consumed{0};
    alignas(64) std::atomic<uint64_t> entered{0};
    dist::CollectiveSignature signatures[2];
  };
  static_assert(std::atomic<uint64_t>::is_always_lock_free, "counters must be address-free");

  ShmChannel(int rank, int size, size_t buffer_bytes, void* base, size_t mapped_bytes);
  Counters& counters(int r) const { return static_cast<Counters*>(base_)[r]; }
  std::vector<int> behind(std::atomic<uint64_t> Counters::*counter, uint64_t steps) const;

  int rank_, size_;
  size_t buffer_bytes_;
  void* base_;
  size_t mapped_bytes_;
  uint64_t next_step_ = 0;  // comm thread only
  uint64_t entered_ = 0;    // likewise
  dist::StagingCopy stage_copy_;
};

}  // namespace acc::mpi
