#pragma once
// The SPMD strategy: sharding by partition specs over a named mesh (PyTorch/XLA's FSDPv2,
// torchprime's rules files). The mesh has an `fsdp` axis and optionally a `model` axis:
//
//   fsdp    data parallel: each fsdp rank computes its own slice of every batch, and the
//           parameters are sharded over it by the FSDP engine (gathered unit by unit, reduced
//           back into shards), as FULL_SHARD over that axis
//   model   tensor parallel: the ranks of one `model` group see the same samples and hold
//           slices of the Linears the rules split over `model` (tensor_parallel.h)
//
// Without a rules file every parameter is split over fsdp (FSDPv2's default). Parameters whose
// spec does not use fsdp stay whole on every fsdp rank, their gradients all-reduced over it.
#include <memory>

#include "acc/strategy/strategy.h"
#include "acc/distributed/mesh.h"
#include "common/axis_names.h"

namespace acc::spmd {

class SpmdStrategy final : public Strategy {
 public:
  std::string name() const override { return "SPMD"; }
  void check_job(const Config& config, int processes) const override;
  void setup(std::shared_ptr<dist::ProcessGroup> world, const dist::Topology& topology,
             const Config& config) override;
  std::shared_ptr<ShardedModel> wrap(std::shared_ptr<models::Model> model) override;
  int data_parallel_rank() const override { return mesh_->coordinate(parallel::kFsdpAxis); }
  int data_parallel_size() const override { return mesh_->size(parallel::kFsdpAxis); }
  std::vector<StrategyEstimate> estimate_memory(const estimate::ModelShape& shape, const estimate::Workload& w,
                                                const Config& config) const override;

 private:
  std::shared_ptr<Mesh> mesh_;
  std::shared_ptr<dist::ProcessGroup> self_group_;
};

}  // namespace acc::spmd
