#pragma once
// What every strategy built on the FSDP engine (the FSDP settings, SPMD's fsdp axis) does with
// the config before handing the engine a model.
#include <memory>
#include <string>

#include "acc/config/config.h"
#include "acc/models/model.h"
#include "fsdp_model.h"

namespace acc::fsdp {

// Warns about fsdp_config keys the engine does not act on, broadcasts rank 0's values over
// `world` with fsdp_sync_module_states (unless deferred initialisation made them equal
// already) and sets the model's compute dtype (the loss writes its gradient in it).
void prepare_model(models::Model& model, const Config& config, dist::ProcessGroup& world);

// The engine's options from the config: mixed precision, checkpointing, prefetch, reduce dtype
// and offload. `shard_size` ranks split each unit (it sizes the offload_dir check).
EngineOptions engine_options(std::string strategy, const Config& config, const models::Model& model,
                             UnitGroups groups, UnitGroups replicated_groups,
                             bool reshard_after_forward, int shard_size);

}  // namespace acc::fsdp
