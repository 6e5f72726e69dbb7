#pragma once
// Point-to-point messages between the ranks of a group on one node, without MPI and without the
// comm thread. A send posts a descriptor (tag, size, the address of the sender's own buffer) in
// one of kSlots slots of its lane in a shared segment, and rings the receiver's doorbell; the
// receiver copies the bytes straight out of the sender's memory with one process_vm_readv
// (cross-memory attach: a single copy, as a pipeline stage's activations need), frees the slot
// and rings the sender's. A message of at most kInline bytes (a stage's header) travels in the
// slot itself: its send completes when posted, and taking it makes no system call. Both sides move their messages along on their own threads: whoever
// waits for (or polls) a send or receive of the group runs `progress()`, and a waiting thread
// sleeps on its rank's doorbell (a futex in the segment) until a peer rings it. So on ranks
// bound to one core each, a message costs no hand-off to a second thread.
//
// Matching follows MPI's rules: receives are matched in the order they were posted, each to the
// earliest message from its peer with its tag (a lane's `published` counter tells the receiver
// which messages its scan of the slots must have seen). A send that finds its lane full is kept
// unposted, never blocking its caller, and the comm thread posts it once the peer makes room (so
// it moves even while its rank blocks in a collective). Every operation must finish within the
// engine's timeout of being issued, checked whenever this rank waits on or polls the mailbox
// (and by the comm thread for the unposted sends); one that does not fails naming the peer, and
// the engine is broken from then on, as with MPI messages: what is pending then fails, and
// what is issued later fails at once. A message larger than its receive buffer fails that
// receive. A posted send that failed keeps its buffer alive while the mailbox lives, since the
// peer may still copy from it.
//
// Made only for groups whose ranks share this node and whose kernel allows the ranks to read
// each other's memory (probed when the mailbox is made; PR_SET_PTRACER_ANY is set for kernels
// with Yama, and cleared again when the mailbox is not used); otherwise, and with ACC_SHM=0 or
// ACC_SHM_P2P=0, point to point stays on MPI messages.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "acc/distributed/work.h"
#include "shm_segment.h"

namespace acc::mpi {

class CommEngine;

class ShmMailbox : public std::enable_shared_from_this<ShmMailbox> {
 public:
  static constexpr int kSlots = 64;     // messages in flight from one rank to another
  static constexpr int kMaxRanks = 16;  // a larger group stays on MPI messages (segment size)
  static constexpr size_t kInline = 88;  // bytes a slot carries itself (it is 128 in all)

  // Collective over comm, blocking; call on the comm thread, only for a group whose ranks all
  // share this node. Null when the ranks cannot read each other's memory (the reason logged).
  static std::shared_ptr<ShmMailbox> create(MPI_Comm comm, CommEngine& engine);
  // What is still pending fails ("the group was destroyed ...").
  ~ShmMailbox();
  ShmMailbox(const ShmMailbox&) = delete;
  ShmMailbox& operator=(const ShmMailbox&) = delete;

  // `work` completes once the peer has copied the bytes (until then `data` must stay valid; the
  // Work holds the tensor) / once the bytes are in `data`.
  void send(std::shared_ptr<dist::Work> work, const void* data, size_t bytes, int peer, int tag);
  void recv(std::shared_ptr<dist::Work> work, void* data, size_t bytes, int peer, int tag);

 private:
  struct alignas(64) RankInfo {
    std::atomic<uint32_t> doorbell{0};  // raised by a peer that posted to or took from this rank
    std::atomic<uint32_t> sleepers{0};  // this rank's threads asleep on it: only then is it woken
    int32_t pid = 0;
    uint64_t probe_address = 0;  // a word whose value the peers check through process_vm_readv
  };
  struct alignas(64) Slot {
    std::atomic<uint32_t> posted{0};  // 1 while it holds a message not yet taken
    int32_t tag = 0;
    uint64_t bytes = 0, address = 0, seq = 0;
    std::atomic<uint64_t> taken_seq{0};  // seq of the last message taken from this slot
    char data[kInline];                  // the message itself, when it is this short
  };
  static_assert(sizeof(Slot) == 128);
  // A lane: the messages from one rank to another.
  struct alignas(64) Lane {
    std::atomic<uint64_t> published{0};  // seq of the last message posted (after its slot)
    Slot slots[kSlots];
  };
  static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free,
                "the segment's atomics must be address-free");
  struct Pending {
    std::shared_ptr<dist::Work> work;
    char* data = nullptr;
    size_t bytes = 0;
    int peer = 0, tag = 0;
    int slot = -1;  // a send's slot once posted
    uint64_t seq = 0;
    std::chrono::steady_clock::time_point issued;
  };

  ShmMailbox(CommEngine& engine, SharedSegment segment, int rank, int size, std::vector<int> world_ranks);
  RankInfo& info(int r) const { return static_cast<RankInfo*>(segment_.base)[r]; }
  Lane& lane(int from, int to) const;
  void ring(int r);
  // Moves every pending operation of this rank along as far as it can without waiting; fails
  // those past the timeout, and all of them once the engine is broken.
  void progress();
  bool post(Pending& send);               // under mutex_; false: the lane is full
  bool take(Pending& recv, std::string& error);  // under mutex_; false: no message yet
  bool pending(const dist::Work* work);
  // Returns once `work` has finished, progressing and sleeping on this rank's doorbell.
  void wait_for(const dist::Work* work);
  void enqueue(std::deque<Pending>& queue, Pending p);
  // Has the comm thread post the unposted sends as room appears (one task at a time).
  void drain_in_background();
  // The peers that unposted sends wait for; clears draining_ when there are none.
  std::vector<int> unposted_peers();

  CommEngine& engine_;
  SharedSegment segment_;
  int rank_, size_;
  std::vector<int> world_ranks_;
  std::mutex mutex_;  // this process's pending operations and its side of the lanes
  std::deque<Pending> sends_, recvs_;  // recvs_ in the order they were posted
  std::vector<uint64_t> next_seq_;     // per peer
  bool draining_ = false;              // the comm thread has a task posting unposted sends
  bool used_ = false;                  // a message has gone through (logged once)
  // Failed sends that were posted: their buffers stay alive, a peer may still copy them.
  std::vector<std::shared_ptr<dist::Work>> abandoned_;
};

}  // namespace acc::mpi
