#pragma once
// acc::accelerate(model, loader, config): the one call that turns a plain single-process
// training loop into a sharded one. It validates the config, makes the strategy it names
// through the plugin registry (a plain run is NO_SHARD on one rank: the same engine), lets the
// strategy take over the model, and gives back the loader restricted to this rank's slice of
// every global batch.
#include <memory>
#include <string>

#include "acc/accelerate/sharded_model.h"
#include "acc/config/config.h"
#include "acc/data/dataloader.h"
#include "acc/plugin/strategy.h"

namespace acc {

struct Accelerated {
  std::shared_ptr<ShardedModel> model;
  data::DataLoader loader;
};

// acc::init (or an acc::Session) must have run. A collective: every rank calls it.
Accelerated accelerate(std::shared_ptr<models::Model> model, const data::DataLoader& loader,
                       const Config& config);

// The config with fsdp_sharding_strategy AUTO replaced by the least-communicating strategy
// whose memory estimate (acc/estimate/memory_estimate.h) fits fsdp_memory_limit: NO_SHARD,
// the hybrids on several nodes, SHARD_GRAD_OP, FULL_SHARD, then FULL_SHARD with activation
// checkpointing. The choice and why are logged. Other configs come back unchanged.
Config resolve_auto_strategy(Config config, const models::Model& model, const data::DataLoader& loader);

// The strategy the config names, set up on the world group (for callers that wrap models
// themselves, e.g. tests and benchmarks that compare strategies).
std::unique_ptr<Strategy> make_strategy(const Config& config);

}  // namespace acc
