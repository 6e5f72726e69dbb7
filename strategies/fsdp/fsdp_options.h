#pragma once
// The FSDP plugin's option section, `fsdp_config:` of Hugging Face accelerate's files, whose
// values live in config.dist.fsdp (acc::FsdpConfig): every key's type, default, help and
// question for `accelerate config`, how it is stored into and read back from FsdpConfig, the
// checks across keys, and the strategy a config names (distributed_type NO: NO_SHARD; FSDP:
// fsdp_sharding_strategy).
#include "acc/config/config.h"
#include "acc/config/option_section.h"

namespace acc::fsdp {

OptionSection option_section();

// Answers the SPMD plugin shares: it is torch_xla's FSDPv2 and reads these fsdp_config keys too.
// fsdp_state_dict_type: FULL_STATE_DICT.
inline bool full_checkpoints(const Config& config) {
  return config.dist.fsdp.state_dict_type == StateDictType::FULL_STATE_DICT;
}
// fsdp_cpu_ram_efficient_loading.
inline bool deferred_init(const Config& config) { return config.dist.fsdp.cpu_ram_efficient_loading; }

}  // namespace acc::fsdp
