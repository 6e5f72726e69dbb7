#pragma once
// acc::Placement: how a piece of a parameter lies along one axis of the ranks that hold the
// model (a mesh axis). The one vocabulary every strategy speaks of its pieces in: the gradient
// norm counts a piece once among its copies, checkpoints and full_parameters() place pieces by
// it, and memory estimates count what a rank holds with it before any model exists.
#include <cstdint>
#include <string>
#include <vector>

namespace acc {

struct Placement {
  // replicated: the axis's ranks hold the same piece; sharded: consecutive ranges of the
  // flattened parameter (FSDP's flat shards); split: blocks of one dim (tensor parallelism).
  enum class Kind { replicated, sharded, split };
  std::string axis;  // "shard", "replicate" (FSDP's mesh), "fsdp", "model" (SPMD's)
  Kind kind = Kind::replicated;
  int ranks = 1;     // along the axis
};

// Ranks holding the same piece: the product of the replicated axes' ranks.
int copies(const std::vector<Placement>& placements);
// Elements of a parameter of `numel` one rank holds: divided among the sharded and split axes'
// ranks, rounded up (FSDP pads its shards to equal sizes).
int64_t held_elements(int64_t numel, const std::vector<Placement>& placements);

}  // namespace acc
