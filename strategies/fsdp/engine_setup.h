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

// How a strategy lays the engine over its ranks.
struct EngineLayout {
  std::string strategy;           // for messages and the type name
  UnitGroups groups;              // the units' shard and replicate groups
  UnitGroups replicated_groups;   // the ignored modules' (whole on every rank of the model)
  bool reshard_after_forward;     // FULL_SHARD, HYBRID_SHARD, SPMD's fsdp axis
  int shard_size;                 // ranks that split each unit (sizes the offload_dir check)
  bool node_copies = false;       // units keep node copies (UnitGroups::node; hpZ)
};

// The engine's options: `layout`, and from the config mixed precision, checkpointing,
// prefetch, reduce dtype, offload, buckets and quantization.
EngineOptions engine_options(const Config& config, const models::Model& model, EngineLayout layout);

}  // namespace acc::fsdp
