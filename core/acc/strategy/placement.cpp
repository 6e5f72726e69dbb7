#include "acc/strategy/placement.h"

namespace acc {

int copies(const std::vector<Placement>& placements) {
  int n = 1;
  for (const auto& p : placements) n *= p.kind == Placement::Kind::replicated ? p.ranks : 1;
  return n;
}

int64_t held_elements(int64_t numel, const std::vector<Placement>& placements) {
  int64_t parts = 1;
  for (const auto& p : placements) parts *= p.kind == Placement::Kind::replicated ? 1 : p.ranks;
  return (numel + parts - 1) / parts;
}

}  // namespace acc
