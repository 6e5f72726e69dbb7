#include "acc/accelerate/accelerate.h"

#include "acc/plugin/registry.h"
#include "acc/runtime/init.h"
#include "acc/util/log.h"

namespace acc {

void check_launchable(const Config& config) {
  config.validate();
  const std::string name = config.strategy_name();
  if (name != kAutoStrategy) plugin::Registry::global().make_strategy(name)->check_job(config, config.dist.num_processes);
}

std::unique_ptr<Strategy> make_strategy(const Config& config) {
  config.validate();
  const std::string name = config.strategy_name();
  ACC_CHECK(name != kAutoStrategy, "fsdp_sharding_strategy AUTO is resolved by acc::accelerate(), which knows the model "
            "and the batch; make_strategy needs a concrete strategy");
  std::unique_ptr<Strategy> strategy = plugin::Registry::global().make_strategy(name);
  strategy->setup(world_ptr(), topology(), config);
  return strategy;
}

Accelerated accelerate(std::shared_ptr<models::Model> model, const data::DataLoader& loader,
                       const Config& config) {
  ACC_CHECK(model, "acc::accelerate: the model is null");
  auto strategy = make_strategy(resolve_auto_strategy(config, *model, loader));
  if (!strategy->initialises_deferred_parameters() && nn::has_deferred_parameters(*model)) {
    log::info("acc::accelerate: {} does not initialise deferred parameters on their shards; "
              "initialising the whole model on every rank", strategy->name());
    nn::materialize(*model);
  }
  auto sharded = strategy->wrap(std::move(model));
  const int dp_rank = strategy->data_parallel_rank(), dp_size = strategy->data_parallel_size();
  log::info("acc::accelerate: {} over {} ranks{}, {} data-parallel", strategy->name(),
            world().size(), config.compute.bf16 ? ", bf16 compute" : "", dp_size);
  return {std::move(sharded), loader.for_rank(dp_rank, dp_size)};
}

}  // namespace acc
