#include "resolve_sharding.h"

#include <set>

#include "acc/util/log.h"
#include "common/axis_names.h"

namespace acc::spmd {

ResolvedSharding resolve_sharding(models::Model& model, const std::vector<std::string>& axis_names,
                                  const std::string& rules_file) {
  std::vector<std::pair<std::string, Shape>> params;
  for (const auto& [name, p] : model.named_parameters()) params.emplace_back(name, p.shape());
  std::vector<std::string> modules;
  for (auto& [path, _] : model.named_modules())
    if (!path.empty()) modules.push_back(path);
  if (rules_file.empty())
    return ShardingRules::parse("{}", "FSDPv2 default").resolve(params, modules, axis_names, parallel::kFsdpAxis);
  ShardingRules rules = ShardingRules::from_file(rules_file);
  rules.rename_axis(parallel::kTensorAxisAlias, parallel::kModelAxis);
  ResolvedSharding sharding = rules.resolve(params, modules, axis_names);
  for (const auto& warning : sharding.warnings) log::warn("{}", warning);
  // acc's modules return one tensor: `[0]` names it as the plain key does, and of the two the
  // first in the file decides, as for any name.
  std::set<std::string> decided;
  std::erase_if(sharding.outputs, [&](const std::pair<std::string, ShardingRule>& o) {
    return o.second.output_index <= 0 && !decided.insert(o.first).second;
  });
  return sharding;
}

}  // namespace acc::spmd
