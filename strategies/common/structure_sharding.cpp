#include "common/structure_sharding.h"

#include <map>

#include "common/axis_names.h"

namespace acc::parallel {

spmd::ResolvedSharding structure_sharding(models::Model& model) {
  const auto params = model.named_parameters();
  std::map<std::string, size_t> index;
  spmd::ResolvedSharding sharding;
  for (const auto& [name, p] : params) {
    index[name] = sharding.parameters.size();
    sharding.parameters.push_back({name, spmd::PartitionSpec{.dims = std::vector<std::vector<std::string>>(
                                                                  static_cast<size_t>(p.dim()))}});
  }
  auto split = [&](const std::string& name, int dim) {
    const auto it = index.find(name);
    if (it != index.end()) sharding.parameters[it->second].second.dims[static_cast<size_t>(dim)] = {kModelAxis};
  };
  const models::Structure structure = model.structure();
  for (const auto& group : structure.split_together)
    for (const auto& member : group.members) {
      split(member.parameter, member.dim);
      // A column-parallel Linear's bias holds its output features: split with them.
      if (member.dim == 0 && member.parameter.ends_with(".weight"))
        split(member.parameter.substr(0, member.parameter.size() - 6) + "bias", 0);
    }
  if (!structure.token_embedding.empty()) split(structure.token_embedding + ".weight", 0);
  if (auto* lm = dynamic_cast<models::CausalLM*>(&model)) {
    const Tensor head = lm->head_weight();
    for (const auto& [name, p] : params)
      if (head.defined() && p.is_same(head)) split(name, 0);
  }
  return sharding;
}

}  // namespace acc::parallel
