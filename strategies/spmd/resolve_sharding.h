#pragma once
// What each parameter and module of a model resolves to under spmd_config.sharding_rules, on a
// mesh with the given axes (torchprime's `tensor` read as `model`); without a rules file,
// FSDPv2's default: every parameter split on its first dim over fsdp. Unmatched keys are logged
// as warnings. Used to wrap a model and to estimate one (deferred parameters suffice).
#include <string>
#include <vector>

#include "acc/models/model.h"
#include "acc/spmd/sharding_rules.h"

namespace acc::spmd {

ResolvedSharding resolve_sharding(models::Model& model, const std::vector<std::string>& axis_names,
                                  const std::string& rules_file);

}  // namespace acc::spmd
