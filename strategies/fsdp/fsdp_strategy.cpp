#include "fsdp_strategy.h"

#include <algorithm>

#include "acc/distributed/single_process_group.h"
#include "acc/util/log.h"
#include "engine_setup.h"
#include "fsdp_estimate.h"

namespace acc::fsdp {

void FsdpStrategy::setup(std::shared_ptr<dist::ProcessGroup> world,
                         const dist::Topology& topology, const Config& config) {
  Strategy::setup(world, topology, config);
  const int n = world->size();
  const int size = config.dist.fsdp.size;
  if (setting_ == ShardingStrategy::NO_SHARD)
    shard_size_ = 1;
  else if (size > 0)
    shard_size_ = size;
  else
    shard_size_ = is_hybrid(setting_) ? topology.local_size : n;
  ACC_CHECK(shard_size_ <= n && n % shard_size_ == 0, "fsdp_config.fsdp_size: ", name(),
            " shards over groups of ", shard_size_, " ranks, which does not divide the ", n,
            " ranks of the job", is_hybrid(setting_) ? " (hybrid: ranks per node, see ACC_RANKS_PER_NODE)" : "");
  // Row-major [replicas, shard]: shard groups are consecutive ranks (one node).
  mesh_ = std::make_shared<Mesh>(world, std::vector<int>{n / shard_size_, shard_size_},
                                 std::vector<std::string>{kReplicateAxis, kShardAxis});
  self_group_ = dist::self_group(*world);
  node_group_ = across_group_ = nullptr;
  const FsdpConfig& fsdp = config.dist.fsdp;
  const int local = std::max(1, topology.local_size);
  node_copies_ = fsdp.reshard_to_node && keeps_node_copies(setting_, shard_size_, local);
  if (fsdp.reshard_to_node && !node_copies_)
    log::info("fsdp_config.fsdp_reshard_after_forward: node changes nothing for {} over shard groups of {} "
              "ranks with {} ranks per node: no gather crosses nodes after the forward",
              name(), shard_size_, local);
  if (fsdp.quantize_weights && mesh_->group(kShardAxis)->span() != dist::Span::cross_node)
    log::info("fsdp_config.fsdp_quantize_weights: int8 changes nothing for {} over shard groups of {} ranks "
              "inside one node: only gathers that cross nodes are quantized",
              name(), shard_size_);
  // Two-level int8 reductions need whole nodes of more than one rank; otherwise a reduction
  // that spans nodes goes over the int8 wire in one level.
  const bool two_level = fsdp.quantize_gradients && local > 1 && shard_size_ > local && shard_size_ % local == 0;
  const auto& shard = mesh_->group(kShardAxis);  // consecutive ranks: a node's are together
  if (node_copies_ || two_level) node_group_ = shard->split(shard->rank() / local, shard->rank(), "node");
  if (two_level) across_group_ = shard->split(shard->rank() % local, shard->rank(), "across nodes");
}

std::shared_ptr<ShardedModel> FsdpStrategy::wrap(std::shared_ptr<models::Model> model) {
  ACC_CHECK(model, name(), ": the model to wrap is null");
  prepare_model(*model, config(), *world());
  auto plans = plan_units(*model, config().dist.fsdp, model->structure());
  using Kind = ShardedModel::Placement::Kind;
  const int replicas = mesh_->size(kReplicateAxis);
  EngineOptions options = engine_options(
      config(), *model,
      {.strategy = name(),
       .groups = {.shard = mesh_->group(kShardAxis),
                  .replicate = mesh_->group(kReplicateAxis),
                  .node = node_group_,
                  .across = across_group_,
                  .placements = sharded_placements(replicas, shard_size_)},
       .replicated_groups = {.shard = self_group_,  // every rank, whole
                             .replicate = world(),
                             .placements = {{kReplicateAxis, Kind::replicated, replicas},
                                            {kShardAxis, Kind::replicated, shard_size_}}},
       .reshard_after_forward = reshards_after_forward(setting_),
       .shard_size = shard_size_,
       .node_copies = node_copies_});
  log::debug("{}: {} units, shard groups of {} ranks, {} replicas", name(), plans.size(),
             shard_size_, replicas);
  return std::make_shared<FsdpModel>(std::move(model), std::move(plans), std::move(options));
}

std::vector<StrategyEstimate> FsdpStrategy::estimate_memory(const estimate::ModelShape& shape,
                                                            const estimate::Workload& workload,
                                                            const Config& config) const {
  return estimate_rows(setting_, shape, workload, config);
}

}  // namespace acc::fsdp
