#include "quantized_schedule.h"

#include <algorithm>
#include <cstring>

#include "acc/distributed/reduce_kernels.h"
#include "acc/kernels/quantize.h"

namespace acc::mpi {
namespace {

size_t message_bytes(int64_t n, dist::ReduceWire wire) {
  return static_cast<size_t>(kernels::quantized_message_bytes(n, wire.block, wire.bits));
}

// A scratch buffer of `bytes` that `s` keeps until it ends.
char* scratch_for(Schedule& s, ScratchPool& scratch, size_t bytes) {
  auto buffer = scratch.acquire(std::max<size_t>(bytes, 4));
  s.scratch.push_back(buffer);
  return static_cast<char*>(buffer.get());
}

}  // namespace

Schedule quantized_reduce_scatter_schedule(int rank, int size, dist::Buffer input, dist::Buffer output,
                                           const std::vector<int64_t>& counts, dist::ReduceOp op,
                                           dist::ReduceWire wire, ScratchPool& scratch) {
  const auto offsets = byte_offsets(counts, DType::f32);
  const int64_t n = counts[rank];
  Schedule s;
  std::vector<size_t> at(static_cast<size_t>(size) + 1, 0);  // each peer's message in `outgoing`
  for (int r = 0; r < size; ++r) at[r + 1] = at[r] + (r == rank ? 0 : message_bytes(counts[r], wire));
  char* outgoing = scratch_for(s, scratch, at[size]);
  char* incoming = scratch_for(s, scratch, message_bytes(n, wire));
  auto* arrived = reinterpret_cast<float*>(scratch_for(s, scratch, static_cast<size_t>(n) * 4));
  auto* acc = static_cast<float*>(output.data);
  const char* in = static_cast<const char*>(input.data);
  s.before = [=] {
    for (int r = 0; r < size; ++r)
      if (r != rank)
        kernels::quantize_message(reinterpret_cast<const float*>(in + offsets[r]), counts[r], wire.block, wire.bits, outgoing + at[r]);
    std::memmove(acc, in + offsets[rank], static_cast<size_t>(n) * 4);
  };
  for (int step = 1; step < size; ++step) {
    const int to = wrap_rank(rank + step, size), from = wrap_rank(rank - step, size);
    s.rounds.push_back(Round{{Message{to, true, outgoing + at[to], at[to + 1] - at[to]},
                              Message{from, false, incoming, message_bytes(n, wire)}},
                             {},
                             [=] {
                               kernels::dequantize_message(incoming, n, wire.block, wire.bits, arrived);
                               dist::kernels::add_to_accumulator(acc, arrived, DType::f32, n);
                             }});
  }
  s.append(store_reduction(acc, output, op, size));
  return s;
}

Schedule quantized_all_reduce_schedule(int rank, int size, dist::Buffer tensor, dist::ReduceOp op,
                                       dist::ReduceWire wire, ScratchPool& scratch) {
  const auto counts = even_counts(tensor.numel, size);
  const auto offsets = byte_offsets(counts, DType::f32);
  const int64_t n = counts[rank];
  auto* own = reinterpret_cast<float*>(byte_at(tensor.data, offsets[rank]));
  Schedule s = quantized_reduce_scatter_schedule(rank, size, tensor, dist::Buffer{own, n, DType::f32}, counts,
                                                 op, wire, scratch);
  Schedule gather;
  char* mine = scratch_for(gather, scratch, message_bytes(n, wire));
  char* incoming = scratch_for(gather, scratch, message_bytes(counts.front(), wire));  // the largest
  gather.before = [=] {
    kernels::quantize_message(own, n, wire.block, wire.bits, mine);
    kernels::dequantize_message(mine, n, wire.block, wire.bits, own);
  };
  for (int step = 1; step < size; ++step) {
    const int to = wrap_rank(rank + step, size), from = wrap_rank(rank - step, size);
    auto* chunk = reinterpret_cast<float*>(byte_at(tensor.data, offsets[from]));
    const int64_t m = counts[from];
    gather.rounds.push_back(Round{{Message{to, true, mine, message_bytes(n, wire)},
                                   Message{from, false, incoming, message_bytes(m, wire)}},
                                  {},
                                  [=] { kernels::dequantize_message(incoming, m, wire.block, wire.bits, chunk); }});
  }
  s.append(std::move(gather));
  return s;
}

}  // namespace acc::mpi
