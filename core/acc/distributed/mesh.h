#pragma once
// acc::Mesh: the ranks of a group laid out row-major on a named grid, e.g. shape (2, 2) with
// axes ("fsdp", "model"): rank r sits at coordinates (r / 2, r % 2). Each axis has the process
// group of the ranks that differ from this one only along it, over which the SPMD strategy
// runs that axis's collectives.
#include <memory>
#include <string>
#include <vector>

#include "acc/distributed/process_group.h"

namespace acc {

class Mesh {
 public:
  // A collective over `group`: the product of `shape` must be its size, and names must be
  // unique and one per dimension.
  Mesh(std::shared_ptr<dist::ProcessGroup> group, std::vector<int> shape, std::vector<std::string> axis_names);
  // The constructor's checks of a mesh over `ranks` ranks, without a group (for a config checked
  // before any rank starts); a wrong size's error ends with `holder`: "num_processes is 2".
  static void check(const std::vector<int>& shape, const std::vector<std::string>& axis_names, int ranks,
                    const std::string& holder);

  const std::vector<int>& shape() const { return shape_; }
  const std::vector<std::string>& axis_names() const { return names_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  bool has_axis(const std::string& name) const;
  // The dimension of `name`; an error naming the mesh's axes when it has none so called.
  int axis(const std::string& name) const;
  int size(const std::string& name) const { return shape_[static_cast<size_t>(axis(name))]; }
  // This rank's coordinate along `name`, and all of them.
  int coordinate(const std::string& name) const { return coords_[static_cast<size_t>(axis(name))]; }
  const std::vector<int>& coordinates() const { return coords_; }
  // The ranks differing from this one only along `name`, ordered by their coordinate on it.
  const std::shared_ptr<dist::ProcessGroup>& group(const std::string& name) const;
  const std::shared_ptr<dist::ProcessGroup>& group() const { return group_; }  // the whole mesh
  // "mesh (2, 2) over axes (fsdp, model)".
  std::string describe() const;

 private:
  std::shared_ptr<dist::ProcessGroup> group_;
  std::vector<int> shape_;
  std::vector<std::string> names_;
  std::vector<int> coords_;
  std::vector<std::shared_ptr<dist::ProcessGroup>> axis_groups_;
};

}  // namespace acc
