#include "shm_schedule.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "acc/distributed/reduce_kernels.h"

namespace acc::mpi {
namespace {

using Channel = std::shared_ptr<ShmChannel>;
// Fills this rank's staging buffer for step k (0-based within the collective).
using Fill = std::function<void(uint64_t k, char* buffer)>;
// Reads the peers' buffers of step k; `step` is the channel-wide step number.
using Drain = std::function<void(uint64_t k, uint64_t step)>;


// all_gather writes its output with non-temporal stores from this size of the whole output on:
// larger outputs leave the caches anyway, and plain stores would first read every line.
constexpr size_t kStreamingBytes = size_t{16} << 20;
void copy_plain(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

// The part of [begin, begin + len) inside [0, total), as a length (0 when past the end).
size_t clipped(size_t begin, size_t len, size_t total) {
  return begin >= total ? 0 : std::min(len, total - begin);
}

// The rounds of `steps` steps over the channel (see shm_schedule.h).
Schedule staged_schedule(Channel channel, uint64_t steps, Fill fill, Drain drain) {
  auto first = std::make_shared<uint64_t>(0);  // channel step of k = 0, known at start
  Schedule s;
  s.before = [channel, first, steps] { *first = channel->reserve_steps(steps); };
  auto fill_round = [&](uint64_t k) {
    Round round;
    round.waiting_on = [channel, first, k] {
      const uint64_t filled = *first + k + 1;  // counting this step
      return filled > ShmChannel::kBuffers ? channel->not_consumed(filled - ShmChannel::kBuffers)
                                           : std::vector<int>{};
    };
    round.after = [channel, first, k, fill] {
      fill(k, channel->buffer(channel->rank(), *first + k));
      channel->publish(*first + k + 1);
    };
    return round;
  };
  auto drain_round = [&](uint64_t k) {
    Round round;
    round.waiting_on = [channel, first, k] { return channel->not_published(*first + k + 1); };
    round.after = [channel, first, k, drain] {
      drain(k, *first + k);
      channel->consume(*first + k + 1);
    };
    return round;
  };
  s.rounds.push_back(fill_round(0));
  for (uint64_t k = 0; k < steps; ++k) {
    if (k + 1 < steps) s.rounds.push_back(fill_round(k + 1));
    s.rounds.push_back(drain_round(k));
  }
  return s;
}

uint64_t steps_for(size_t largest, size_t per_step) {
  return std::max<uint64_t>(1, (largest + per_step - 1) / per_step);
}

}  // namespace

Schedule shm_all_gather_schedule(Channel channel, dist::Buffer input, dist::Buffer output,
                                 const std::vector<int64_t>& counts) {
  const int me = channel->rank(), p = channel->size();
  const auto offsets = byte_offsets(counts, output.dtype);
  std::vector<size_t> bytes(p);
  for (int r = 0; r < p; ++r) bytes[r] = offsets[r + 1] - offsets[r];
  const size_t piece = channel->buffer_bytes();
  const uint64_t steps = steps_for(*std::max_element(bytes.begin(), bytes.end()), piece);
  char* own = byte_at(output.data, offsets[me]);
  const char* in = static_cast<const char*>(input.data);
  const bool streaming = offsets[p] >= kStreamingBytes;
  const auto copy = streaming ? dist::kernels::copy_streaming : copy_plain;
  Fill fill = [channel, in, own, mine = bytes[me], piece, streaming](uint64_t k, char* buffer) {
    const size_t begin = k * piece, len = clipped(begin, piece, mine);
    channel->stage(buffer, in + begin, len, own != in ? own + begin : nullptr, streaming);
  };
  Drain drain = [channel, out = output.data, offsets, bytes, piece, me, p, copy](uint64_t k,
                                                                                 uint64_t step) {
    const size_t begin = k * piece;
    for (int q = 0; q < p; ++q)
      if (q != me) copy(byte_at(out, offsets[q] + begin), channel->buffer(q, step), clipped(begin, piece, bytes[q]));
  };
  return staged_schedule(std::move(channel), steps, std::move(fill), std::move(drain));
}

Schedule shm_reduce_scatter_schedule(Channel channel, dist::Buffer input, dist::Buffer output,
                                     const std::vector<int64_t>& counts, dist::ReduceOp op,
                                     ScratchPool& scratch) {
  const int me = channel->rank(), p = channel->size();
  const DType dtype = input.dtype;
  const size_t elem = dtype_size(dtype);
  const size_t acc_elem = dtype_size(dist::kernels::accumulator_dtype(dtype));
  const auto offsets = byte_offsets(counts, dtype);
  const int64_t n = counts[me];
  // Each step carries `segment` elements of every peer's chunk, each at a 64-byte aligned
  // place in the buffer: the piece a rank writes for rank q sits in slot q, counting only its
  // peers (so at 2 ranks the whole buffer is one slot, and a step carries twice as much).
  const size_t segment = std::max<size_t>(1, channel->buffer_bytes() / (p - 1) / 64) * 64 / elem;
  auto slot = [](int reader, int writer) { return reader < writer ? reader : reader - 1; };
  const uint64_t steps =
      steps_for(static_cast<size_t>(*std::max_element(counts.begin(), counts.end())), segment);

  Schedule s;
  void* acc = reduction_accumulator(s, output, scratch);
  const char* in = static_cast<const char*>(input.data);
  Fill fill = [channel, in, offsets, counts, segment, elem, me, p, slot](uint64_t k, char* buffer) {
    const size_t begin = k * segment;
    for (int q = 0; q < p; ++q)
      if (q != me) {
        const size_t len = clipped(begin, segment, static_cast<size_t>(counts[q]));
        channel->stage(buffer + slot(q, me) * segment * elem, in + offsets[q] + begin * elem, len * elem);
      }
  };
  Drain drain = [channel, acc, own = in + offsets[me], n, segment, elem, acc_elem, dtype, me, p,
                 slot](uint64_t k, uint64_t step) {
    const size_t begin = k * segment;
    const auto len = static_cast<int64_t>(clipped(begin, segment, static_cast<size_t>(n)));
    if (len == 0) return;
    void* acc_segment = byte_at(acc, begin * acc_elem);
    for (int distance = 1; distance < p; ++distance) {
      const int writer = wrap_rank(me - distance, p);
      const char* piece = channel->buffer(writer, step) + slot(me, writer) * segment * elem;
      if (distance == 1)
        dist::kernels::sum_to_accumulator(acc_segment, own + begin * elem, piece, dtype, len);
      else
        dist::kernels::add_to_accumulator(acc_segment, piece, dtype, len);
    }
  };
  s.append(staged_schedule(std::move(channel), steps, std::move(fill), std::move(drain)));
  s.append(store_reduction(acc, output, op, p));
  return s;
}

Schedule shm_broadcast_schedule(Channel channel, dist::Buffer tensor, int root) {
  const size_t piece = channel->buffer_bytes(), total = tensor.nbytes();
  char* data = static_cast<char*>(tensor.data);
  const bool is_root = channel->rank() == root;
  Fill fill = [channel, data, piece, total, is_root](uint64_t k, char* buffer) {
    if (is_root) channel->stage(buffer, data + k * piece, clipped(k * piece, piece, total));
  };
  Drain drain = [channel, data, piece, total, is_root, root](uint64_t k, uint64_t step) {
    if (!is_root)
      std::memcpy(data + k * piece, channel->buffer(root, step), clipped(k * piece, piece, total));
  };
  const uint64_t steps = steps_for(total, piece);
  return staged_schedule(std::move(channel), steps, std::move(fill), std::move(drain));
}

Schedule shm_barrier_schedule(Channel channel) {
  // One empty step: its drain waits until every rank has published, i.e. has arrived.
  return staged_schedule(std::move(channel), 1, [](uint64_t, char*) {}, [](uint64_t, uint64_t) {});
}

}  // namespace acc::mpi
