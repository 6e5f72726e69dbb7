#pragma once
// The FSDP strategy: one engine, five settings. Every setting is a shard group (ranks that
// split each unit) and a replicate group (ranks holding the same shard), plus whether units
// free their gathered parameters after forward:
//
//   setting              shard group              replicate group    reshard after forward
//   FULL_SHARD           fsdp.size (all) ranks    the rest (none)    yes
//   SHARD_GRAD_OP        fsdp.size (all) ranks    the rest (none)    no
//   NO_SHARD             this rank                every rank         -
//   HYBRID_SHARD         the node (or fsdp.size)  across nodes       yes
//   HYBRID_SHARD_ZERO2   the node (or fsdp.size)  across nodes       no
#include "acc/distributed/mesh.h"
#include "acc/strategy/strategy.h"

namespace acc::fsdp {

class FsdpStrategy final : public Strategy {
 public:
  explicit FsdpStrategy(ShardingStrategy setting) : setting_(setting) {}
  std::string name() const override { return to_string(setting_); }
  void setup(std::shared_ptr<dist::ProcessGroup> world, const dist::Topology& topology,
             const Config& config) override;
  std::shared_ptr<ShardedModel> wrap(std::shared_ptr<models::Model> model) override;
  // Each unit makes this rank's shard of a deferred parameter from its recorded initialisation.
  bool initialises_deferred_parameters() const override { return true; }
  // This setting's rows (fsdp_estimate.h); FULL_SHARD adds AUTO's last resort, itself with
  // activation checkpointing.
  std::vector<StrategyEstimate> estimate_memory(const estimate::ModelShape& shape, const estimate::Workload& workload,
                                                const Config& config) const override;

  // Ranks per shard group for this setting, world size and node size.
  int shard_size() const { return shard_size_; }

 private:
  ShardingStrategy setting_;
  int shard_size_ = 1;
  std::shared_ptr<Mesh> mesh_;  // (replicate, shard), row-major: shard groups are consecutive ranks
  std::shared_ptr<dist::ProcessGroup> self_group_;
  // When shard groups span nodes and fsdp_reshard_after_forward: node or
  // fsdp_quantize_gradients: int8 asks for them (UnitGroups::node, ::across); null otherwise.
  std::shared_ptr<dist::ProcessGroup> node_group_, across_group_;
  bool node_copies_ = false;  // fsdp_reshard_after_forward: node, and it applies
};

}  // namespace acc::fsdp
