#pragma once
// What this process's collectives move, for every group together: ProcessGroup counts each
// call as it is issued. Bytes are what this rank sends under a bandwidth-optimal schedule (a
// ring), whatever the backend really does, so strategies can be compared by what they ask of
// the network: all_gather and reduce_scatter (n-1)/n of the whole buffer, all_reduce twice
// that, broadcast (n-1)/n of the buffer (a chain, averaged over its ranks), send the tensor.
// One-rank groups move nothing. `accelerate`'s tests and benchmarks read it.
#include <array>
#include <cstdint>
#include <string>

namespace acc::dist {

enum class TrafficKind { all_gather, reduce_scatter, all_reduce, broadcast, send };
constexpr int kTrafficKinds = 5;
std::string to_string(TrafficKind kind);

struct Traffic {
  std::array<uint64_t, kTrafficKinds> bytes{};  // indexed by TrafficKind
  std::array<uint64_t, kTrafficKinds> calls{};

  uint64_t bytes_of(TrafficKind kind) const { return bytes[static_cast<int>(kind)]; }
  uint64_t calls_of(TrafficKind kind) const { return calls[static_cast<int>(kind)]; }
  uint64_t total_bytes() const;
};

// Counted since the process started or the last reset_traffic().
Traffic traffic();
void reset_traffic();
// ProcessGroup's: one call of `kind` moving `buffer_bytes` over a group of `group_size` ranks.
void count_traffic(TrafficKind kind, uint64_t buffer_bytes, int group_size);

}  // namespace acc::dist
