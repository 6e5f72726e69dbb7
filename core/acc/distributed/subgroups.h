#pragma once
// The subgroups hybrid strategies need, built with ProcessGroup::split. Each is a collective:
// every rank of `group` must call it.
#include <memory>
#include <vector>

#include "acc/distributed/environment.h"
#include "acc/distributed/process_group.h"

namespace acc::dist {

// Ranks on the same node as this one (node from `topology`), ordered by local rank.
std::shared_ptr<ProcessGroup> node_local_group(ProcessGroup& world, const Topology& topology);
// Ranks with the same local rank as this one, one per node, ordered by node.
std::shared_ptr<ProcessGroup> cross_node_group(ProcessGroup& world, const Topology& topology);

// The group's ranks laid out row-major on a mesh of shape `dims` (product == group size);
// returns the ranks that differ from this one only in coordinate `axis`, ordered along it.
std::shared_ptr<ProcessGroup> mesh_axis_group(ProcessGroup& group, const std::vector<int>& dims,
                                              int axis);

}  // namespace acc::dist
