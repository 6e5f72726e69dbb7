// Entry point of the fsdp strategy plugin: one engine registered under its five settings, and
// its section, fsdp_config.
#include "acc/plugin/plugin_api.h"
#include "acc/plugin/registry.h"
#include "fsdp_options.h"
#include "fsdp_strategy.h"

namespace {

void register_fsdp(acc::plugin::Registry& registry) {
  using acc::ShardingStrategy;
  registry.add_option_section(acc::fsdp::option_section());
  for (auto setting : {ShardingStrategy::FULL_SHARD, ShardingStrategy::SHARD_GRAD_OP,
                       ShardingStrategy::NO_SHARD, ShardingStrategy::HYBRID_SHARD,
                       ShardingStrategy::HYBRID_SHARD_ZERO2})
    registry.add_strategy(acc::to_string(setting), [setting] {
      return std::make_unique<acc::fsdp::FsdpStrategy>(setting);
    });
}

}  // namespace

ACC_PLUGIN("fsdp", register_fsdp)
