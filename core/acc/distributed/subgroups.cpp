#include "acc/distributed/subgroups.h"

#include <string>

#include "acc/util/error.h"

namespace acc::dist {

std::shared_ptr<ProcessGroup> node_local_group(ProcessGroup& world, const Topology& topology) {
  return world.split(topology.node, topology.local_rank,
                     world.name() + "/node" + std::to_string(topology.node));
}

std::shared_ptr<ProcessGroup> cross_node_group(ProcessGroup& world, const Topology& topology) {
  return world.split(topology.local_rank, topology.node,
                     world.name() + "/cross" + std::to_string(topology.local_rank));
}

std::shared_ptr<ProcessGroup> mesh_axis_group(ProcessGroup& group, const std::vector<int>& dims,
                                              int axis) {
  int64_t product = 1;
  for (int d : dims) {
    ACC_CHECK(d >= 1, "mesh_axis_group: mesh dims must be >= 1");
    product *= d;
  }
  ACC_CHECK(product == group.size(), "mesh_axis_group: a mesh of ", product,
            " ranks does not match ", group.describe(), " of size ", group.size());
  ACC_CHECK(axis >= 0 && axis < static_cast<int>(dims.size()), "mesh_axis_group: axis ", axis,
            " is out of range for a mesh of ", dims.size(), " dims");
  // Row-major coordinates of this rank; the color is the index with `axis` left out.
  int rest = group.rank();
  int color = 0, stride = 1, coord = 0;
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    const int c = rest % dims[d];
    rest /= dims[d];
    if (d == axis) {
      coord = c;
    } else {
      color += c * stride;
      stride *= dims[d];
    }
  }
  return group.split(color, coord,
                     group.name() + "/axis" + std::to_string(axis) + "." + std::to_string(color));
}

}  // namespace acc::dist
