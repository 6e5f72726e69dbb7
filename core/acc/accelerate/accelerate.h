#pragma once
// acc::accelerate(model, loader, config): the one call that turns a plain single-process
// training loop into a sharded one. It validates the config, makes the strategy it names
// through the plugin registry (a plain run is NO_SHARD on one rank: the same engine), lets the
// strategy take over the model, and gives back the loader restricted to this rank's slice of
// every global batch.
#include <memory>
#include <string>

#include "acc/accelerate/auto_strategy.h"
#include "acc/config/config.h"
#include "acc/data/dataloader.h"
#include "acc/nn/deferred_init.h"
#include "acc/strategy/sharded_model.h"
#include "acc/strategy/strategy.h"

namespace acc {

struct Accelerated {
  std::shared_ptr<ShardedModel> model;
  data::DataLoader loader;
};

// acc::init (or an acc::Session) must have run. A collective: every rank calls it.
Accelerated accelerate(std::shared_ptr<models::Model> model, const data::DataLoader& loader,
                       const Config& config);

// Builds a model for accelerate(). When the strategy asks for it (FSDP and SPMD:
// fsdp_cpu_ram_efficient_loading) its parameters get no memory here (nn::DeferredInit): the
// strategy makes each rank's shards directly, with the values a full initialisation would give,
// so no rank ever holds the whole model.
//   auto model = acc::make_model<acc::models::GPT2>(config, acc::models::GPT2Config::small(), 0);
template <class M, class... Args>
std::shared_ptr<M> make_model(const Config& config, Args&&... args) {
  nn::DeferredInit deferred(strategy_answer(config, &OptionSection::deferred_init, false));
  return std::make_shared<M>(std::forward<Args>(args)...);
}

// Config::validate(), then what the strategy the config runs would refuse on a job of its
// num_processes ranks (Strategy::check_job): a name no plugin registers, a mesh of another
// size, pipeline stages that do not divide the processes. `accelerate config validate` and
// `accelerate launch` call it, so that a config every rank would stop on stops before any rank
// starts. AUTO's choice is checked when it is made, on the ranks.
void check_launchable(const Config& config);

// The strategy the config names, set up on the world group (for callers that wrap models
// themselves, e.g. tests and benchmarks that compare strategies).
std::unique_ptr<Strategy> make_strategy(const Config& config);

}  // namespace acc
