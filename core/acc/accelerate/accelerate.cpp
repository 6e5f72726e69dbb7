#include "acc/accelerate/accelerate.h"

#include "acc/estimate/memory_estimate.h"
#include "acc/plugin/registry.h"
#include "acc/runtime/init.h"
#include "acc/util/log.h"

namespace acc {

namespace {

// Tokens per sample, from the dataset's first sample (0 when it holds no token ids).
int64_t sequence_length(const data::DataLoader& loader) {
  if (loader.dataset().size() == 0) return 0;
  const int64_t first = 0;
  const data::Batch sample = loader.dataset().get_batch({&first, 1}, {});
  return sample.contains("input_ids") && sample["input_ids"].dim() == 2 ? sample["input_ids"].size(1) : 0;
}

}  // namespace

Config resolve_auto_strategy(Config config, const models::Model& model, const data::DataLoader& loader) {
  FsdpConfig& f = config.dist.fsdp;
  if (config.dist.distributed_type != DistributedType::FSDP || f.sharding_strategy != ShardingStrategy::AUTO)
    return config;
  const dist::Topology& t = topology();
  const estimate::Workload w{.world = t.world_size,
                             .ranks_per_node = t.local_size,
                             .batch = loader.options().batch_size,
                             .seq = sequence_length(loader),
                             .bf16 = config.compute.bf16,
                             .wrap_blocks = f.effective_wrap_policy() != WrapPolicy::NO_WRAP,
                             .vocab_parallel = f.vocab_parallel};
  const int64_t limit = f.memory_limit > 0 ? f.memory_limit : estimate::default_memory_limit(t.local_size);
  const estimate::Choice choice = estimate::choose(estimate::ModelShape::of(model), w, limit);
  f.sharding_strategy = choice.estimate.plan.strategy;
  f.activation_checkpointing = f.activation_checkpointing || choice.estimate.plan.activation_checkpointing;
  const std::string chosen = estimate::to_string(choice.estimate.plan);
  if (choice.fits)
    log::info("fsdp_sharding_strategy AUTO chose {}: {}", chosen, choice.reason);
  else
    log::warn("fsdp_sharding_strategy AUTO: nothing fits the limit; using {}, the least memory ({})", chosen,
              choice.reason);
  return config;
}

std::unique_ptr<Strategy> make_strategy(const Config& config) {
  config.validate();
  ACC_CHECK(config.dist.distributed_type != DistributedType::FSDP ||
                config.dist.fsdp.sharding_strategy != ShardingStrategy::AUTO,
            "fsdp_sharding_strategy AUTO is resolved by acc::accelerate(), which knows the model and the "
            "batch; make_strategy needs a concrete strategy");
  const std::string name = config.strategy_name();
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
