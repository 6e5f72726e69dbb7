#include "signature_check.h"

#include "acc/util/error.h"

namespace acc::mpi {
namespace {

void check_same(const dist::CollectiveSignature& mine, const dist::CollectiveSignature& theirs,
                int rank, int peer, const std::vector<int>& world_ranks) {
  if (!(mine == theirs))
    ACC_FAIL(dist::signature_mismatch(world_ranks[rank], mine, world_ranks[peer], theirs));
}

}  // namespace

Schedule signature_check_schedule(int rank, int size, const dist::CollectiveSignature& mine,
                                  std::vector<int> world_ranks) {
  // Slot q holds rank q's signature; this rank's own slot is what it sends.
  auto all = std::make_shared<std::vector<dist::CollectiveSignature>>(size, mine);
  constexpr size_t bytes = sizeof(dist::CollectiveSignature);
  Round round;
  for (int q = 0; q < size; ++q) {
    if (q == rank) continue;
    round.messages.push_back(Message{q, true, &(*all)[rank], bytes});
    round.messages.push_back(Message{q, false, &(*all)[q], bytes});
  }
  round.after = [all, rank, size, world_ranks = std::move(world_ranks)] {
    for (int q = 0; q < size; ++q)
      if (q != rank) check_same((*all)[rank], (*all)[q], rank, q, world_ranks);
  };
  Schedule s;
  s.rounds.push_back(std::move(round));
  s.scratch.push_back(all);
  return s;
}

Schedule shm_signature_check_schedule(std::shared_ptr<ShmChannel> channel,
                                      const dist::CollectiveSignature& mine,
                                      std::vector<int> world_ranks) {
  auto number = std::make_shared<uint64_t>(0);  // the collective's number in the channel
  Schedule s;
  s.before = [channel, number, mine] { *number = channel->enter(mine); };
  Round round;
  round.waiting_on = [channel, number] { return channel->not_entered(*number); };
  round.after = [channel, number, mine, world_ranks = std::move(world_ranks)] {
    for (int q = 0; q < channel->size(); ++q)
      if (q != channel->rank()) check_same(mine, channel->signature(q, *number), channel->rank(), q, world_ranks);
  };
  s.rounds.push_back(std::move(round));
  return s;
}

}  // namespace acc::mpi
