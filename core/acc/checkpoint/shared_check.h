#pragma once
// Checking a checkpoint once across the ranks that load it. Each rank sums (CRC-32) the runs of
// file bytes it reads anyway (PieceReader::summed_range). Where the runs of all ranks cover a
// piece's entry end to end, their sums combined stand for its checksum: no rank reads it a
// second time to check it. The pieces left over are read whole and checked by one rank each.
// Internal to acc::checkpoint (load_state).
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "acc/checkpoint/manifest.h"
#include "acc/distributed/process_group.h"

namespace acc::checkpoint {

class SharedCheck {
 public:
  // Elements [first, end) of a piece's entry that one read of this rank sums.
  struct Run {
    const PieceRecord* piece = nullptr;
    int64_t first = 0, end = 0;
  };
  // A collective. `pieces`: every piece the load needs intact, in the same order on every rank;
  // `runs`: per read of this rank, the run it can sum, if any.
  SharedCheck(dist::ProcessGroup& group, const std::vector<const PieceRecord*>& pieces,
              const std::vector<std::optional<Run>>& runs);

  // This rank's share of the pieces no runs cover: to read whole and check.
  const std::vector<const PieceRecord*>& whole() const { return whole_; }
  // Per read of this rank: whether its sum is wanted.
  const std::vector<bool>& summed() const { return summed_; }
  // A collective: every rank's sums (per read, as PieceReader::verify_all returns them) set
  // against the checksums of the pieces they cover. Throws on the one rank that compares a
  // piece whose sums do not make its checksum. `read_ok` false: this rank's reading failed (it
  // reports that itself), and no rank compares anything.
  void compare(dist::ProcessGroup& group, const std::vector<uint32_t>& sums, bool read_ok) const;

 private:
  // One run of a covering chain: the rank and read that summed it, its length, and the other
  // ranks' reads of exactly that range, which must sum the same.
  struct Link {
    int rank = 0;
    int64_t read = 0, elements = 0;
    std::vector<std::pair<int, int64_t>> same;
  };
  struct Covered {
    const PieceRecord* piece = nullptr;
    std::vector<Link> links;
  };
  std::vector<Covered> mine_;  // covered pieces this rank compares: those it summed first
  std::vector<const PieceRecord*> whole_;
  std::vector<bool> summed_;
};

}  // namespace acc::checkpoint
