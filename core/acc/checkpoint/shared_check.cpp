#include "acc/checkpoint/shared_check.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "acc/distributed/agreement.h"
#include "acc/io/safetensors.h"
#include "acc/util/error.h"

namespace acc::checkpoint {

namespace {

// A run declared by some rank: elements [first, end) of a piece, summed by that rank's read.
struct Declared {
  int64_t first = 0, end = 0;
  int rank = 0;
  int64_t read = 0;
};

}  // namespace

SharedCheck::SharedCheck(dist::ProcessGroup& group, const std::vector<const PieceRecord*>& pieces,
                         const std::vector<std::optional<Run>>& runs)
    : summed_(runs.size(), false) {
  std::map<const PieceRecord*, int64_t> index;
  for (size_t i = 0; i < pieces.size(); ++i) index[pieces[i]] = static_cast<int64_t>(i);
  // Every rank's runs, as (piece, first, end, read) quadruples: pieces by their place in
  // `pieces`, the same list on every rank.
  std::vector<int64_t> mine;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i] || runs[i]->end <= runs[i]->first) continue;
    const auto it = index.find(runs[i]->piece);
    if (it == index.end()) continue;
    mine.insert(mine.end(), {it->second, runs[i]->first, runs[i]->end, static_cast<int64_t>(i)});
  }
  Tensor packed = Tensor::empty({static_cast<int64_t>(mine.size())}, DType::i64);
  std::copy(mine.begin(), mine.end(), packed.data<int64_t>());
  const dist::Gathered gathered = dist::all_gather_uneven(group, packed);
  std::vector<std::vector<Declared>> declared(pieces.size());
  std::vector<int64_t> reading(static_cast<size_t>(group.size()), 0);  // elements each rank reads early
  const int64_t* q = gathered.all.data<int64_t>();
  for (size_t r = 0; r < gathered.counts.size(); ++r)
    for (int64_t k = 0; k < gathered.counts[r]; k += 4, q += 4) {
      declared[static_cast<size_t>(q[0])].push_back({q[1], q[2], static_cast<int>(r), q[3]});
      reading[r] += q[2] - q[1];
    }

  // A piece is covered when a chain of runs goes from its first element to its last, each
  // starting where the one before ended (the longest run at each place). Runs overlapping the
  // chain otherwise are left out of it: those bytes are checked by the chain.
  std::vector<const PieceRecord*> uncovered;
  for (size_t p = 0; p < pieces.size(); ++p) {
    auto& runs_of = declared[p];
    std::sort(runs_of.begin(), runs_of.end(), [](const Declared& a, const Declared& b) {
      return std::tuple(a.first, -a.end, a.rank, a.read) < std::tuple(b.first, -b.end, b.rank, b.read);
    });
    Covered covered{pieces[p], {}};
    int64_t at = 0;
    size_t k = 0;
    while (at < pieces[p]->count) {
      while (k < runs_of.size() && runs_of[k].first < at) ++k;
      if (k == runs_of.size() || runs_of[k].first != at) break;
      const Declared& link = runs_of[k];
      covered.links.push_back({link.rank, link.read, link.end - link.first, {}});
      for (++k; k < runs_of.size() && runs_of[k].first == link.first && runs_of[k].end == link.end; ++k)
        covered.links.back().same.emplace_back(runs_of[k].rank, runs_of[k].read);
      at = link.end;
    }
    if (pieces[p]->count == 0 || at != pieces[p]->count) {
      uncovered.push_back(pieces[p]);
      continue;
    }
    for (const Link& link : covered.links) {
      if (link.rank == group.rank()) summed_[static_cast<size_t>(link.read)] = true;
      for (const auto& [rank, read] : link.same)
        if (rank == group.rank()) summed_[static_cast<size_t>(read)] = true;
    }
    if (covered.links.front().rank == group.rank()) mine_.push_back(std::move(covered));
  }

  // The rest, largest first, each to the rank with the fewest elements to read so far.
  std::stable_sort(uncovered.begin(), uncovered.end(),
                   [](const PieceRecord* a, const PieceRecord* b) { return a->count > b->count; });
  for (const PieceRecord* piece : uncovered) {
    const auto least = std::min_element(reading.begin(), reading.end());
    *least += piece->count;
    if (least - reading.begin() == group.rank()) whole_.push_back(piece);
  }
}

void SharedCheck::compare(dist::ProcessGroup& group, const std::vector<uint32_t>& sums, bool read_ok) const {
  // [read_ok, sums...] from every rank.
  Tensor packed = Tensor::empty({static_cast<int64_t>(sums.size()) + 1}, DType::i64);
  packed.data<int64_t>()[0] = read_ok ? 1 : 0;
  std::copy(sums.begin(), sums.end(), packed.data<int64_t>() + 1);
  const dist::Gathered gathered = dist::all_gather_uneven(group, packed);
  std::vector<const int64_t*> of_rank;
  const int64_t* q = gathered.all.data<int64_t>();
  for (const int64_t count : gathered.counts) {
    if (q[0] == 0) return;  // a rank's reading failed: it says why
    of_rank.push_back(q + 1);
    q += count;
  }
  auto sum = [&](int rank, int64_t read) { return static_cast<uint32_t>(of_rank[static_cast<size_t>(rank)][read]); };
  for (const Covered& c : mine_) {
    uint32_t crc = 0;
    bool same = true;
    for (const Link& link : c.links) {
      const uint32_t s = sum(link.rank, link.read);
      for (const auto& [rank, read] : link.same) same = same && sum(rank, read) == s;
      crc = io::combine_crc32(crc, s, static_cast<size_t>(link.elements) * sizeof(float));
    }
    ACC_CHECK(same && crc == c.piece->crc32, c.piece->file, ": \"", c.piece->entry,
              "\" does not match its checksum (the file was altered or damaged)");
  }
}

}  // namespace acc::checkpoint
