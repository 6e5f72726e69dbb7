#pragma once
// Reductions whose data crosses the wire block-quantized to int8 or int4 (dist::ReduceWire,
// ZeRO++'s qgZ). They always go as MPI messages: the groups they are for span nodes, where
// there is no shared memory.
//  - reduce_scatter: when the schedule starts, every peer's chunk is quantized into a message
//    of its own; in step s rank r sends its message for r+s and receives r-s's message for its
//    own chunk, dequantizes it and adds it to an f32 accumulator that starts as its own chunk
//    (which is never quantized). A rank sends about a quarter (int8) or an eighth
//    (int4) of f32's bytes.
//  - all_reduce: that reduce-scatter in place over near-equal chunks, then each rank quantizes
//    its reduced chunk, keeps the dequantized values itself (so every rank ends with the same
//    bits) and sends the message to every peer, pairwise as all_gather does.
#include <vector>

#include "schedule.h"

namespace acc::mpi {

Schedule quantized_reduce_scatter_schedule(int rank, int size, dist::Buffer input, dist::Buffer output,
                                           const std::vector<int64_t>& counts, dist::ReduceOp op,
                                           dist::ReduceWire wire, ScratchPool& scratch);
Schedule quantized_all_reduce_schedule(int rank, int size, dist::Buffer tensor, dist::ReduceOp op,
                                       dist::ReduceWire wire, ScratchPool& scratch);

}  // namespace acc::mpi
