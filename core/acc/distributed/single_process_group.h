#pragma once
// The built-in group of one process: every collective is a local copy, no MPI involved, so a
// program trains on one process without any plugin.
#include "acc/distributed/process_group.h"

namespace acc::dist {

class SingleProcessGroup final : public ProcessGroup {
 public:
  explicit SingleProcessGroup(std::string name = "world", int world_rank = 0)
      : ProcessGroup(std::move(name), {world_rank}) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }

 protected:
  void do_all_gather(std::shared_ptr<Work> work, Buffer input, Buffer output,
                     std::vector<int64_t> counts, Lane lane) override;
  void do_reduce_scatter(std::shared_ptr<Work> work, Buffer input, Buffer output,
                         std::vector<int64_t> counts, ReduceOp op, ReduceWire wire) override;
  void do_all_reduce(std::shared_ptr<Work> work, Buffer tensor, ReduceOp op, ReduceWire wire) override;
  void do_broadcast(std::shared_ptr<Work> work, Buffer tensor, int root) override;
  void do_barrier(std::shared_ptr<Work> work) override;
  void do_send(std::shared_ptr<Work> work, Buffer tensor, int peer, int tag) override;
  void do_recv(std::shared_ptr<Work> work, Buffer tensor, int peer, int tag) override;
  std::shared_ptr<ProcessGroup> do_split(int color, int key, std::string name) override;
};

// This rank of `group` alone, as a group named "<group>/self": where a strategy keeps what
// no collective of `group` touches (the replicated unit's shard group, say).
std::shared_ptr<ProcessGroup> self_group(const ProcessGroup& group);

}  // namespace acc::dist
