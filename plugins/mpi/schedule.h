#pragma once
// Collectives as schedules: rounds of point-to-point messages, each followed by local work
// (reduce what arrived, finish the result). Building a schedule needs no MPI; the comm engine
// posts each round's messages with MPI_Isend/Irecv and polls them, so every wait can time out
// and name the peers that have not answered.
//
// Algorithms (chosen by measurement on a 2-core node, see docs/launch.md):
//  - all_gather, reduce_scatter: pairwise exchange. In step s rank r sends to r+s and
//    receives from r-s, so every byte crosses once and reduce_scatter receives original
//    values, summed by our vectorised kernel into an f32 accumulator (bf16 is rounded once at
//    the end, not once per hop as a ring would). reduce_scatter moves each step in segments
//    that fit in L2, so the received segment is summed while still in cache; all of a step's
//    sends are posted at once (detached), so each segment costs no round trip to the peer.
//  - all_reduce: reduce_scatter then all_gather on near-equal chunks, in place (composed by
//    MpiProcessGroup over whichever transport the group uses).
//  - broadcast: the root sends to every rank in one round (groups here are small).
//  - barrier: dissemination, ceil(log2 p) rounds of empty messages.
// Groups whose ranks share a node use the shared-memory schedules of shm_schedule.h instead.
#include <functional>
#include <memory>
#include <vector>

#include "acc/distributed/process_group.h"
#include "scratch_pool.h"

namespace acc::mpi {

struct Message {
  int peer = 0;  // rank in the group
  bool send = false;
  void* data = nullptr;
  size_t bytes = 0;
  // A send its round does not wait for (the schedule still ends only once it is done), so a
  // round needs no reply from the peer. Only for buffers nothing writes until the end.
  bool detached = false;
};

struct Round {
  std::vector<Message> messages;
  // A condition besides the messages (shared-memory counters, shm_schedule.h): the group ranks
  // the round still waits on; the round is complete once this is empty. Null: none.
  std::function<std::vector<int>()> waiting_on;
  std::function<void()> after;  // runs once the round is complete
};

struct Schedule {
  std::function<void()> before;  // runs when the schedule starts
  std::vector<Round> rounds;
  std::vector<std::shared_ptr<void>> scratch;  // temporary buffers kept alive until the end

  // Runs `next` after this one: next.before becomes the last step of this schedule.
  void append(Schedule&& next);
};

Schedule all_gather_schedule(int rank, int size, dist::Buffer input, dist::Buffer output,
                             const std::vector<int64_t>& counts);
Schedule reduce_scatter_schedule(int rank, int size, dist::Buffer input, dist::Buffer output,
                                 const std::vector<int64_t>& counts, dist::ReduceOp op,
                                 ScratchPool& scratch);
Schedule broadcast_schedule(int rank, int size, dist::Buffer tensor, int root);
Schedule barrier_schedule(int rank, int size);

// Near-equal chunks of n elements over `size` ranks (the first n % size get one more).
std::vector<int64_t> even_counts(int64_t n, int size);

// --- parts shared by the schedule builders of both transports ---
// Byte offset of every rank's chunk, and the end (size + 1 entries).
std::vector<size_t> byte_offsets(const std::vector<int64_t>& counts, DType dtype);
inline char* byte_at(void* base, size_t offset) { return static_cast<char*>(base) + offset; }
inline int wrap_rank(int r, int size) { return ((r % size) + size) % size; }
// Where reduce_scatter sums: the output itself, or (bf16) an f32 scratch kept alive by `s`.
void* reduction_accumulator(Schedule& s, dist::Buffer output, ScratchPool& scratch);
// The last part of a reduce_scatter: output = accumulator, divided by `size` for avg.
Schedule store_reduction(void* accumulator, dist::Buffer output, dist::ReduceOp op, int size);

}  // namespace acc::mpi
