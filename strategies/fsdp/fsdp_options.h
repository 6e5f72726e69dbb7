#pragma once
// The FSDP plugin's option section, `fsdp_config:` of Hugging Face accelerate's files, whose
// values live in config.dist.fsdp (acc::FsdpConfig): every key's type, default, help and
// question for `accelerate config`, how it is stored into and read back from FsdpConfig, the
// checks across keys, and the strategy a config names (distributed_type NO: NO_SHARD; FSDP:
// fsdp_sharding_strategy).
#include "acc/config/option_section.h"

namespace acc::fsdp {

OptionSection option_section();

}  // namespace acc::fsdp
