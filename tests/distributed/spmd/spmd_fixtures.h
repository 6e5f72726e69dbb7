#pragma once
// What the SPMD tests share: configs over the meshes a world of 1, 2 or 4 ranks can form.
#include <string>
#include <vector>

#include "../fsdp/fsdp_fixtures.h"

namespace acc::test {

// distributed_type SPMD on `shape` over axes (fsdp, model), wrapping the family's blocks;
// `rules` is a file under configs/sharding/ (empty: FSDPv2's default).
Config spmd_config(const std::string& kind, std::vector<int> shape, const std::string& rules = "",
                   bool bf16 = false);
// The widest tensor-parallel mesh the world allows with at most 2 ranks along `model`:
// 1 -> (1, 1), 2 -> (1, 2), 4 -> (2, 2).
std::vector<int> fsdp_tp_mesh();
// The family's fsdp-tp rules (configs/sharding/<kind>-fsdp-tp.yaml) on fsdp_tp_mesh().
Config fsdp_tp_config(const std::string& kind, bool bf16 = false);
// configs/sharding/<file> under the source tree.
std::string rules_path(const std::string& file);

}  // namespace acc::test
