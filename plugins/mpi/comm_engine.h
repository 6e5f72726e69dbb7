#pragma once
// The communication thread. OpenMPI makes no progress on its own here, so one dedicated thread
// owns every MPI call (MPI_Init_thread with FUNNELED happens on it): user threads enqueue
// tasks and get a Work back, which lets collectives overlap the caller's computation.
//
// Ordering: collectives start one at a time in the order they were submitted (the same order
// on every rank, as the API requires); point-to-point transfers start at once and progress
// alongside. With two lanes (more than one node), urgent collectives (dist::Lane) form a
// second such queue that progresses beside the first, so an urgent gather never waits behind
// ordered reductions: a collective's messages carry its lane as the tag on the group's
// communicator, so the lanes' messages never match each other, and a group on one node has a
// shared-memory channel per lane. A collective that makes no MPI call (the shared-memory
// schedules) may instead run on the thread that waits for it, when nothing is ahead of it
// (run_here): a blocking collective then costs no hand-off to this thread and back, which on a
// core shared by both threads is two thread switches. Every task must finish within
// ACC_COMM_TIMEOUT of starting; otherwise it fails with a message naming the op, its group and
// the peers that have not answered, and the engine is broken from then on: later tasks fail at
// once and the job is aborted at shutdown (pending transfers make a clean MPI_Finalize
// impossible), so the process exits non-zero.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "acc/distributed/work.h"
#include "schedule.h"
#include "scratch_pool.h"
#include "shm_channel.h"
#include "shm_mailbox.h"
#include "sim_link.h"

namespace acc::mpi {

struct Task {
  bool collective = true;  // false: point to point (its own lane, no ordering)
  MPI_Comm comm = MPI_COMM_NULL;
  // Point to point: the user's tag. Collectives use their lane as the tag on their own
  // communicator (post_round): both ends post each link's messages in the same order, and MPI
  // matches them in that order.
  int tag = 0;
  std::vector<int> world_ranks;  // group rank -> world rank, for messages
  std::shared_ptr<dist::Work> work;
  Schedule schedule;
  // The schedule makes no MPI call (shared memory only), so any thread may run it.
  bool any_thread = false;
  int lane = 0;  // collectives: 0 ordered, 1 urgent (dist::Lane)
};

class CommEngine {
 public:
  // Starts the thread, initialises MPI on it and duplicates MPI_COMM_WORLD; throws on failure.
  // `two_lanes`: this rank wants the urgent lane (the ranks agree: all or none get it).
  CommEngine(std::chrono::duration<double> timeout, bool two_lanes);
  ~CommEngine() { stop(); }
  // Finishes queued tasks, then finalizes MPI (or aborts the job if broken); idempotent.
  // Tasks submitted afterwards fail at once.
  void stop();
  CommEngine(const CommEngine&) = delete;
  CommEngine& operator=(const CommEngine&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // The private duplicates of MPI_COMM_WORLD: one for collectives, one for send/recv.
  MPI_Comm world_collective_comm() const { return coll_comm_; }
  MPI_Comm world_p2p_comm() const { return p2p_comm_; }
  // The world's shared-memory channel; null unless every rank is on this node.
  std::shared_ptr<ShmChannel> world_shm() const { return world_shm_; }
  // The world's second channel, for the urgent lane; null unless world_shm() and two_lanes().
  std::shared_ptr<ShmChannel> world_urgent_shm() const { return world_urgent_shm_; }
  // The world's point-to-point mailbox; null unless world_shm() and the ranks can read each
  // other's memory.
  std::shared_ptr<ShmMailbox> world_mailbox() const { return world_mailbox_; }
  // Whether collectives start by comparing signatures (signature_check.h): on unless some rank
  // has ACC_CHECK_COLLECTIVES=0, agreed at start-up so that all ranks run the same rounds.
  bool check_signatures() const { return check_signatures_; }
  // The simulated link that paces collectives across nodes (sim_link.h); none unless set.
  const std::optional<SimLink>& sim_link() const { return sim_link_; }
  // The simulated link's time, shared by the lanes.
  LinkClock& link_clock() { return link_clock_; }
  // Whether urgent collectives get a lane of their own: every rank wanted it.
  bool two_lanes() const { return two_lanes_; }

  void submit(Task task);
  // Runs the collective of `work` on the calling thread if it is the next to start, the comm
  // thread has none in hand and any thread may run it; otherwise returns at once and the comm
  // thread runs it as usual. Either way the order of collectives is the submission order.
  void run_here(const dist::Work* work);
  // Temporary buffers shared by all groups' collectives.
  ScratchPool& scratch() { return scratch_; }
  // ACC_COMM_TIMEOUT: how long any task may take.
  std::chrono::duration<double> timeout() const { return timeout_; }
  // The first failure, once a communication has failed (the engine is then broken); else empty.
  std::string broken() const;
  // Fails `work` with `reason` and breaks the engine: for work done off the comm thread (the
  // shared-memory mailbox).
  void fail_work(dist::Work& work, const std::string& reason);
  // Ends the whole job; called from any thread (the comm thread makes the MPI_Abort call).
  [[noreturn]] void abort(int exit_code);

 private:
  struct Active;
  void thread_main();
  void start(Active& a);
  bool progress(Active& a);  // true when the task has finished (done or failed)
  void post_round(Active& a);
  void fail(Active& a, const std::string& reason);
  void fail_timed_out(Active& a);

  std::chrono::duration<double> timeout_;
  ScratchPool scratch_;
  int world_rank_ = 0, world_size_ = 1;
  MPI_Comm coll_comm_ = MPI_COMM_NULL, p2p_comm_ = MPI_COMM_NULL;
  std::shared_ptr<ShmChannel> world_shm_, world_urgent_shm_;
  std::shared_ptr<ShmMailbox> world_mailbox_;
  bool check_signatures_ = true;
  std::optional<SimLink> sim_link_;
  LinkClock link_clock_;
  bool two_lanes_ = false;
  bool we_initialized_mpi_ = false;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  std::atomic<int> queued_{0};  // queue_.size(), readable without the lock (idle spin)
  // Collectives the comm thread has taken from queue_ and not finished (raised under mutex_).
  std::atomic<int> collectives_taken_{0};
  std::atomic<bool> running_here_{false};  // a waiting thread runs a collective (run_here)
  bool stopping_ = false;
  std::atomic<int> abort_code_{-1};
  mutable std::mutex failure_mutex_;  // guards the two below: failures happen on any runner
  std::string broken_;  // the first failure, once there was one
  std::vector<std::shared_ptr<void>> abandoned_;  // see fail_timed_out()
  std::mutex join_mutex_;

  std::string init_error_;
  bool init_done_ = false;
  std::thread thread_;
};

}  // namespace acc::mpi
