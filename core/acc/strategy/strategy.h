#pragma once
// acc::Strategy: how a model is spread over ranks (FSDP's five settings, SPMD, a third party's
// own). Strategies live in plugins and are made by name through the plugin registry; they talk
// to other ranks only through acc::dist::ProcessGroup, never MPI.
//
// acc::accelerate() makes the strategy the config names, calls setup() with the world group,
// then wrap() with the user's model; the loader is cut by data_parallel_rank()/size().
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "acc/strategy/sharded_model.h"
#include "acc/config/config.h"
#include "acc/distributed/environment.h"
#include "acc/distributed/process_group.h"
#include "acc/estimate/memory_estimate.h"

namespace acc {

// One way a strategy would run a workload, as `accelerate estimate-memory` prints it and AUTO
// (accelerate/auto_strategy.h) chooses among them.
struct StrategyEstimate {
  std::string plan;  // the row's name: "DILOCO (inner_steps 8)"
  estimate::Memory memory;
  // Where AUTO tries this row among every strategy's rows, lower first: the less a row
  // communicates, the earlier. FSDP's rows: NO_SHARD 100, HYBRID_SHARD_ZERO2 200, HYBRID_SHARD
  // 300, SHARD_GRAD_OP 400, FULL_SHARD 500, FULL_SHARD with activation checkpointing 600;
  // PIPELINE's stage per node over several machines 150.
  // Empty: AUTO never chooses it (a strategy that does not train as one process would).
  std::optional<int> auto_order{};
  // Not empty: the strategy would refuse this plan, and this says why (the error its ranks
  // would stop with); `memory` is not estimated and AUTO never chooses the row.
  std::string refused{};
  // The config keys AUTO sets when it chooses this row, as Config::set takes them
  // ({"fsdp_config.fsdp_sharding_strategy", "SHARD_GRAD_OP"}).
  std::vector<std::pair<std::string, std::string>> settings{};
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // The name it is registered and chosen under, e.g. "FULL_SHARD".
  virtual std::string name() const = 0;
  // Called once before wrap(): the world group, this process's place in the job and the
  // validated config. Strategies split the subgroups they need here (a collective).
  virtual void setup(std::shared_ptr<dist::ProcessGroup> world, const dist::Topology& topology,
                     const Config& config) {
    world_ = std::move(world);
    topology_ = topology;
    config_ = config;
  }
  // Throws the error setup() would on a world of `processes` ranks with `config` (a mesh that
  // holds another number of ranks, stages that do not divide them), so that `accelerate config
  // validate` and `accelerate launch` refuse before any rank starts what every rank would.
  // Called on a strategy that was not set up; setup() makes the same checks.
  virtual void check_job(const Config& /*config*/, int /*processes*/) const {}
  // Takes over the model: from now on its parameters belong to the returned ShardedModel.
  virtual std::shared_ptr<ShardedModel> wrap(std::shared_ptr<models::Model> model) = 0;
  // True when wrap() gives deferred parameters (nn::DeferredInit) their values itself, each rank
  // only its shards; for other strategies accelerate() materialises them whole first.
  virtual bool initialises_deferred_parameters() const { return false; }
  // Ranks that see different samples: every rank, unless a strategy splits a model over ranks
  // that must see the same batch (tensor parallel).
  virtual int data_parallel_rank() const { return world_->rank(); }
  virtual int data_parallel_size() const { return world_->size(); }
  // Per-rank memory of one training step (AdamW) of a model of `shape` on `workload`, with the
  // options of `config`, for `accelerate estimate-memory` and AUTO: one row per way it could
  // run, none when it gives no estimate. Called on a strategy that was not set up.
  virtual std::vector<StrategyEstimate> estimate_memory(const estimate::ModelShape& /*shape*/,
                                                        const estimate::Workload& /*workload*/,
                                                        const Config& /*config*/) const {
    return {};
  }

  const std::shared_ptr<dist::ProcessGroup>& world() const { return world_; }
  const dist::Topology& topology() const { return topology_; }
  const Config& config() const { return config_; }

 private:
  std::shared_ptr<dist::ProcessGroup> world_;
  dist::Topology topology_;
  Config config_;
};

}  // namespace acc
