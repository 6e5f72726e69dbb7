#include "acc/distributed/mesh.h"

#include <algorithm>
#include <set>

#include "acc/distributed/subgroups.h"
#include "acc/util/error.h"
#include "acc/util/strings.h"

namespace acc {

Mesh::Mesh(std::shared_ptr<dist::ProcessGroup> group, std::vector<int> shape, std::vector<std::string> axis_names)
    : group_(std::move(group)), shape_(std::move(shape)), names_(std::move(axis_names)) {
  ACC_CHECK(group_, "Mesh: no process group");
  check(shape_, names_, group_->size(), group_->describe() + " has " + std::to_string(group_->size()));
  coords_.assign(shape_.size(), 0);
  for (int d = ndim() - 1, rest = group_->rank(); d >= 0; --d) {
    coords_[static_cast<size_t>(d)] = rest % shape_[static_cast<size_t>(d)];
    rest /= shape_[static_cast<size_t>(d)];
  }
  for (int d = 0; d < ndim(); ++d) axis_groups_.push_back(dist::mesh_axis_group(*group_, shape_, d));
}

void Mesh::check(const std::vector<int>& shape, const std::vector<std::string>& names, int ranks,
                 const std::string& holder) {
  ACC_CHECK(!shape.empty(), "Mesh: the shape is empty; give one size per axis, e.g. (2, 2)");
  ACC_CHECK(names.size() == shape.size(), "Mesh: ", shape.size(), " sizes (", util::join(shape), ") but ",
            names.size(), " axis names (", util::join(names), "); give one name per axis");
  std::set<std::string> seen;
  for (const auto& name : names) {
    ACC_CHECK(!name.empty(), "Mesh: an axis name is empty");
    ACC_CHECK(seen.insert(name).second, "Mesh: axis name '", name, "' appears twice in (", util::join(names), ")");
  }
  int64_t held = 1;
  for (int n : shape) {
    ACC_CHECK(n >= 1, "Mesh: axis sizes must be >= 1, got (", util::join(shape), ")");
    held *= n;
  }
  ACC_CHECK(held == ranks, "Mesh: shape (", util::join(shape), ") holds ", held, " ranks but ", holder);
}

bool Mesh::has_axis(const std::string& name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

int Mesh::axis(const std::string& name) const {
  const auto it = std::find(names_.begin(), names_.end(), name);
  ACC_CHECK(it != names_.end(), describe(), " has no axis '", name, "'");
  return static_cast<int>(it - names_.begin());
}

const std::shared_ptr<dist::ProcessGroup>& Mesh::group(const std::string& name) const {
  return axis_groups_[static_cast<size_t>(axis(name))];
}

std::string Mesh::describe() const { return "mesh (" + util::join(shape_) + ") over axes (" + util::join(names_) + ")"; }

}  // namespace acc
