#pragma once
// The ProcessGroup of the mpi plugin: turns each call into a schedule and hands it to the
// comm engine shared by the world group and every subgroup split from it. Collectives go
// through the group's shared-memory channel when its ranks share a node, through MPI messages
// otherwise; send/recv to a peer on this node through the group's mailbox (shm_mailbox.h) when
// it has one, through MPI messages otherwise.
#include <mpi.h>

#include <memory>

#include "acc/distributed/process_group.h"
#include "comm_engine.h"
#include "shm_schedule.h"

namespace acc::mpi {

class MpiProcessGroup final : public dist::ProcessGroup {
 public:
  // The world group over the engine's duplicate of MPI_COMM_WORLD.
  static std::shared_ptr<MpiProcessGroup> world(std::shared_ptr<CommEngine> engine);

  MpiProcessGroup(std::shared_ptr<CommEngine> engine, std::string name,
                  std::vector<int> world_ranks, int rank, MPI_Comm collective_comm,
                  MPI_Comm p2p_comm, std::shared_ptr<ShmChannel> shm, std::shared_ptr<ShmChannel> urgent_shm,
                  std::shared_ptr<ShmMailbox> mailbox);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(world_ranks().size()); }
  std::string backend() const override { return "mpi"; }
  void abort(int exit_code) noexcept override { engine_->abort(exit_code); }
  void finalize() override { engine_->stop(); }

 protected:
  void do_all_gather(std::shared_ptr<dist::Work> work, dist::Buffer input, dist::Buffer output,
                     std::vector<int64_t> counts, dist::Lane lane) override;
  void do_reduce_scatter(std::shared_ptr<dist::Work> work, dist::Buffer input,
                         dist::Buffer output, std::vector<int64_t> counts,
                         dist::ReduceOp op, dist::ReduceWire wire) override;
  void do_all_reduce(std::shared_ptr<dist::Work> work, dist::Buffer tensor,
                     dist::ReduceOp op, dist::ReduceWire wire) override;
  void do_broadcast(std::shared_ptr<dist::Work> work, dist::Buffer tensor, int root) override;
  void do_barrier(std::shared_ptr<dist::Work> work) override;
  void do_send(std::shared_ptr<dist::Work> work, dist::Buffer tensor, int peer,
               int tag) override;
  void do_recv(std::shared_ptr<dist::Work> work, dist::Buffer tensor, int peer,
               int tag) override;
  std::shared_ptr<dist::ProcessGroup> do_split(int color, int key, std::string name) override;

 private:
  // any_thread: the schedule makes no MPI call, so the thread that waits may run it (lane 0
  // only). The urgent lane (1) has a shared-memory channel of its own, `urgent_shm_`.
  void submit_collective(std::shared_ptr<dist::Work> work, Schedule schedule, bool any_thread, int lane = 0);
  // The schedules over this group's transport: the shared-memory channel, or MPI messages.
  Schedule gather_schedule(dist::Buffer input, dist::Buffer output, const std::vector<int64_t>& counts);
  Schedule scatter_schedule(dist::Buffer input, dist::Buffer output,
                            const std::vector<int64_t>& counts, dist::ReduceOp op);
  // One message; a receive from another node waits, besides, for the simulated link to carry it.
  void submit_p2p(std::shared_ptr<dist::Work> work, Message message, int tag);

  std::shared_ptr<CommEngine> engine_;  // shared by all groups; the last one finalizes MPI
  int rank_;
  MPI_Comm coll_comm_, p2p_comm_;
  std::shared_ptr<ShmChannel> shm_;  // null: the ranks are not on one node, or ACC_SHM=0
  std::shared_ptr<ShmChannel> urgent_shm_;  // the urgent lane's; null also with one lane
  std::shared_ptr<ShmMailbox> mailbox_;     // null: send/recv go through MPI
};

}  // namespace acc::mpi
