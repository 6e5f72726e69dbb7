// Entry point of the spmd strategy plugin: registers "SPMD" and its section, spmd_config.
#include "acc/plugin/plugin_api.h"
#include "acc/plugin/registry.h"
#include "spmd_options.h"
#include "spmd_strategy.h"

namespace {

void register_spmd(acc::plugin::Registry& registry) {
  registry.add_option_section(acc::spmd::option_section());
  registry.add_strategy("SPMD", [] { return std::make_unique<acc::spmd::SpmdStrategy>(); });
}

}  // namespace

ACC_PLUGIN("spmd", register_spmd)
