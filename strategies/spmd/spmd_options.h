#pragma once
// The SPMD plugin's option section, `spmd_config:`, whose values live in config.dist.spmd
// (acc::SpmdConfig): the mesh, its axis names and the sharding rules file, their questions,
// the checks when distributed_type is SPMD, and the strategy that type runs ("SPMD").
#include "acc/config/option_section.h"

namespace acc::spmd {

OptionSection option_section();

}  // namespace acc::spmd
