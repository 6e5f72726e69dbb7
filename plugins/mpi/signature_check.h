#pragma once
// The round a collective starts with: every rank shows its signature (what it is entering, see
// dist/collective_signature.h) to every peer of the group and compares theirs with its own
// before any data moves. On a mismatch the round's `after` throws the error naming both sides,
// which fails the collective and breaks the engine, so the job ends instead of hanging or
// mixing up buffers. MpiProcessGroup puts it in front of each collective unless the ranks
// agreed at start-up to skip it (ACC_CHECK_COLLECTIVES=0).
#include <memory>
#include <vector>

#include "acc/distributed/collective_signature.h"
#include "schedule.h"
#include "shm_channel.h"

namespace acc::mpi {

// Over MPI messages: one round, a 128-byte exchange with each peer.
Schedule signature_check_schedule(int rank, int size, const dist::CollectiveSignature& mine,
                                  std::vector<int> world_ranks);
// Over the shared-memory channel: post the signature, wait until every peer has posted theirs.
Schedule shm_signature_check_schedule(std::shared_ptr<ShmChannel> channel,
                                      const dist::CollectiveSignature& mine,
                                      std::vector<int> world_ranks);

}  // namespace acc::mpi
