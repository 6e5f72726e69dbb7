#pragma once
// Collectives over a ShmChannel, as schedules the comm engine runs like the message-based ones
// in schedule.h. A collective is cut into steps; in each, every rank fills its staging buffer
// (the piece each peer needs from it), then reads the peers' buffers (copying or summing).
// Each step is two rounds that wait on the channel's counters instead of on messages:
//   fill k:  wait until every peer has consumed step k - kBuffers (the buffer is free again);
//   drain k: wait until every peer has published step k.
// Fills run one step ahead of drains, so a rank can stage its next piece while a slower peer
// still reads the previous one. Sums follow the same order as the message-based schedules
// (own chunk, then the ranks before this one, nearest first), so both give the same bits.
#include <memory>
#include <vector>

#include "acc/distributed/process_group.h"
#include "schedule.h"
#include "scratch_pool.h"
#include "shm_channel.h"

namespace acc::mpi {

Schedule shm_all_gather_schedule(std::shared_ptr<ShmChannel> channel, dist::Buffer input,
                                 dist::Buffer output, const std::vector<int64_t>& counts);
Schedule shm_reduce_scatter_schedule(std::shared_ptr<ShmChannel> channel, dist::Buffer input,
                                     dist::Buffer output, const std::vector<int64_t>& counts,
                                     dist::ReduceOp op, ScratchPool& scratch);
Schedule shm_broadcast_schedule(std::shared_ptr<ShmChannel> channel, dist::Buffer tensor,
                                int root);
Schedule shm_barrier_schedule(std::shared_ptr<ShmChannel> channel);

}  // namespace acc::mpi
