#pragma once
// A partition spec: for each dimension of a tensor, the mesh axes it is split over. [fsdp, null]
// splits dim 0 over the fsdp axis and keeps dim 1 whole on every rank; [[data, fsdp], null]
// splits dim 0 over data and fsdp together (data outermost). As in torchprime and PyTorch/XLA.
#include <string>
#include <vector>

namespace YAML {
class Node;
}

namespace acc::spmd {

struct PartitionSpec {
  // dims[d]: the axes dimension d is split over, outermost first; empty: not split (null).
  std::vector<std::vector<std::string>> dims;

  size_t rank() const { return dims.size(); }
  // The axes the whole tensor is split over, in dimension order.
  std::vector<std::string> axes() const;
  std::string to_string() const;  // "[fsdp, null]", "[[data, fsdp], null]"
  bool operator==(const PartitionSpec&) const = default;
};

// Every dim of a rank-`rank` tensor whole, but dim 0 split over `axis` (FSDPv2's default).
PartitionSpec first_dim_on(const std::string& axis, size_t rank);

// From a YAML sequence whose entries are an axis name, null, or a sequence of axis names. An
// error names `where` (e.g. the rules file and key) and what was expected.
PartitionSpec parse_partition_spec(const YAML::Node& node, const std::string& where);

}  // namespace acc::spmd
