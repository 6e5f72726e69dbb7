#include "acc/spmd/partition_spec.h"

#include <yaml-cpp/yaml.h>

#include <set>

#include "acc/util/error.h"
#include "acc/util/strings.h"

namespace acc::spmd {

std::vector<std::string> PartitionSpec::axes() const {
  std::vector<std::string> out;
  for (const auto& d : dims) out.insert(out.end(), d.begin(), d.end());
  return out;
}

std::string PartitionSpec::to_string() const {
  std::string out = "[";
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d) out += ", ";
    if (dims[d].empty()) {
      out += "null";
    } else if (dims[d].size() == 1) {
      out += dims[d][0];
    } else {
      out += '[';
      out += util::join(dims[d]);
      out += ']';
    }
  }
  return out + "]";
}

PartitionSpec first_dim_on(const std::string& axis, size_t rank) {
  PartitionSpec spec;
  spec.dims.resize(rank);
  if (rank) spec.dims[0] = {axis};
  return spec;
}

PartitionSpec parse_partition_spec(const YAML::Node& node, const std::string& where) {
  const char* expected = "a list with one entry per tensor dimension, each an axis name, null, or a list of axis "
                         "names (e.g. [fsdp, null])";
  ACC_CHECK(node.IsSequence(), where, ": expected ", expected);
  PartitionSpec spec;
  std::set<std::string> used;
  auto add_axis = [&](const YAML::Node& n, std::vector<std::string>& dim) {
    ACC_CHECK(n.IsScalar(), where, ": expected ", expected);
    const std::string axis = n.as<std::string>();
    ACC_CHECK(used.insert(axis).second, where, ": axis '", axis, "' splits more than one dimension");
    dim.push_back(axis);
  };
  for (const auto& entry : node) {
    std::vector<std::string> dim;
    if (entry.IsNull()) {
    } else if (entry.IsSequence()) {
      for (const auto& axis : entry) add_axis(axis, dim);
    } else {
      add_axis(entry, dim);
    }
    spec.dims.push_back(std::move(dim));
  }
  return spec;
}

}  // namespace acc::spmd
