#include "schedule.h"

#include <algorithm>
#include <cstring>

#include "acc/distributed/reduce_kernels.h"

namespace acc::mpi {
namespace {

// reduce_scatter's segment: the received segment and its slice of the accumulator stay in
// L2 (512 KB per core here) between arrival and summation.
constexpr size_t kSegmentBytes = size_t{128} << 10;

}  // namespace

void Schedule::append(Schedule&& next) {
  if (next.before) {
    if (rounds.empty()) {
      auto first = std::move(before);
      before = [first = std::move(first), second = std::move(next.before)] {
        if (first) first();
        second();
      };
    } else {
      auto first = std::move(rounds.back().after);
      rounds.back().after = [first = std::move(first), second = std::move(next.before)] {
        if (first) first();
        second();
      };
    }
  }
  for (auto& round : next.rounds) rounds.push_back(std::move(round));
  for (auto& s : next.scratch) scratch.push_back(std::move(s));
}

std::vector<size_t> byte_offsets(const std::vector<int64_t>& counts, DType dtype) {
  std::vector<size_t> offsets(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i)
    offsets[i + 1] = offsets[i] + static_cast<size_t>(counts[i]) * dtype_size(dtype);
  return offsets;
}

void* reduction_accumulator(Schedule& s, dist::Buffer output, ScratchPool& scratch) {
  const DType wide = dist::kernels::accumulator_dtype(output.dtype);
  if (wide == output.dtype) return output.data;
  auto buffer = scratch.acquire(static_cast<size_t>(output.numel) * dtype_size(wide));
  void* acc = buffer.get();
  s.scratch.push_back(std::move(buffer));
  return acc;
}

Schedule store_reduction(void* accumulator, dist::Buffer output, dist::ReduceOp op, int size) {
  const float scale = op == dist::ReduceOp::avg ? 1.f / static_cast<float>(size) : 1.f;
  Schedule s;
  s.before = [accumulator, output, scale] {
    dist::kernels::store_accumulator(accumulator, output.data, output.dtype, output.numel, scale);
  };
  return s;
}

std::vector<int64_t> even_counts(int64_t n, int size) {
  std::vector<int64_t> counts(size, n / size);
  for (int i = 0; i < n % size; ++i) ++counts[i];
  return counts;
}

Schedule all_gather_schedule(int rank, int size, dist::Buffer input, dist::Buffer output,
                             const std::vector<int64_t>& counts) {
  const auto offsets = byte_offsets(counts, output.dtype);
  Schedule s;
  char* own = byte_at(output.data, offsets[rank]);
  if (own != input.data) {
    const size_t bytes = input.nbytes();
    s.before = [own, src = input.data, bytes] { std::memmove(own, src, bytes); };
  }
  for (int step = 1; step < size; ++step) {
    const int to = wrap_rank(rank + step, size), from = wrap_rank(rank - step, size);
    s.rounds.push_back(Round{{Message{to, true, own, offsets[rank + 1] - offsets[rank]},
                              Message{from, false, byte_at(output.data, offsets[from]),
                                      offsets[from + 1] - offsets[from]}},
                             {},
                             {}});
  }
  return s;
}

Schedule reduce_scatter_schedule(int rank, int size, dist::Buffer input, dist::Buffer output,
                                 const std::vector<int64_t>& counts, dist::ReduceOp op,
                                 ScratchPool& scratch) {
  const DType dtype = input.dtype;
  const size_t elem = dtype_size(dtype);
  const auto offsets = byte_offsets(counts, dtype);
  const int64_t n = counts[rank];
  Schedule s;
  void* acc = reduction_accumulator(s, output, scratch);
  const int64_t segment = std::max<int64_t>(1, static_cast<int64_t>(kSegmentBytes / elem));
  auto recv = scratch.acquire(static_cast<size_t>(std::min(n, segment)) * elem);
  s.scratch.push_back(recv);
  const char* own = byte_at(input.data, offsets[rank]);
  // With peers, the first step sums this rank's own chunk and the first arrival in one pass;
  // alone, the accumulator starts as the own chunk.
  if (size == 1 && acc != own)
    s.before = [acc, own, dtype, n] { dist::kernels::load_accumulator(acc, own, dtype, n); };
  const size_t acc_elem = dtype_size(dist::kernels::accumulator_dtype(dtype));
  for (int step = 1; step < size; ++step) {
    const int to = wrap_rank(rank + step, size), from = wrap_rank(rank - step, size);
    // Both ends of a link cut its chunk alike (segment k starts at element k * segment, at
    // least one message even when empty), so each end posts the same messages in the same
    // order and MPI's non-overtaking rule pairs them.
    const int64_t send_n = counts[to];
    const int64_t send_segments = std::max<int64_t>(1, (send_n + segment - 1) / segment);
    const int64_t recv_segments = std::max<int64_t>(1, (n + segment - 1) / segment);
    for (int64_t k = 0; k < std::max(send_segments, recv_segments); ++k) {
      Round round;
      if (k < recv_segments) {
        const int64_t begin = std::min(n, k * segment);
        const int64_t len = std::min(n, begin + segment) - begin;
        round.messages.push_back(Message{from, false, recv.get(), static_cast<size_t>(len) * elem});
        void* acc_segment = byte_at(acc, begin * acc_elem);
        if (step == 1) {
          round.after = [acc_segment, own = own + begin * elem, recv = recv.get(), dtype, len] {
            dist::kernels::sum_to_accumulator(acc_segment, own, recv, dtype, len);
          };
        } else {
          round.after = [acc_segment, recv = recv.get(), dtype, len] {
            dist::kernels::add_to_accumulator(acc_segment, recv, dtype, len);
          };
        }
      }
      s.rounds.push_back(std::move(round));
    }
    // Every send of the step goes out with its first round, in segment order.
    Round& first = s.rounds[s.rounds.size() - std::max(send_segments, recv_segments)];
    for (int64_t k = 0; k < send_segments; ++k) {
      const int64_t begin = std::min(send_n, k * segment);
      const int64_t len = std::min(send_n, begin + segment) - begin;
      first.messages.push_back(Message{to, true, byte_at(input.data, offsets[to] + begin * elem),
                                       static_cast<size_t>(len) * elem, true});
    }
  }
  s.append(store_reduction(acc, output, op, size));
  return s;
}

Schedule broadcast_schedule(int rank, int size, dist::Buffer tensor, int root) {
  Schedule s;
  Round round;
  if (rank == root) {
    for (int peer = 0; peer < size; ++peer)
      if (peer != root) round.messages.push_back(Message{peer, true, tensor.data, tensor.nbytes()});
  } else {
    round.messages.push_back(Message{root, false, tensor.data, tensor.nbytes()});
  }
  if (size > 1) s.rounds.push_back(std::move(round));
  return s;
}

Schedule barrier_schedule(int rank, int size) {
  Schedule s;
  for (int distance = 1; distance < size; distance *= 2)
    s.rounds.push_back(Round{{Message{wrap_rank(rank + distance, size), true, nullptr, 0},
                              Message{wrap_rank(rank - distance, size), false, nullptr, 0}},
                             {},
                             {}});
  return s;
}

}  // namespace acc::mpi
