#pragma once
// What this process's collectives move, for every group together: ProcessGroup counts each
// call as it is issued. Bytes are what this rank sends under a bandwidth-optimal schedule (a
// ring), whatever the backend really does, so strategies can be compared by what they ask of
// the network: all_gather and reduce_scatter (n-1)/n of the whole buffer, all_reduce twice
// that, broadcast (n-1)/n of the buffer (a chain, averaged over its ranks), send the tensor.
// One-rank groups move nothing. Counts are kept apart by span: groups whose ranks share a node
// and groups that cross nodes (what a multi-machine job pays for). Tests and benchmarks read
// it; with ACC_PROFILE=1 acc::shutdown prints it.
#include <array>
#include <cstdint>
#include <string>

namespace acc::dist {

enum class TrafficKind { all_gather, reduce_scatter, all_reduce, broadcast, send };
constexpr int kTrafficKinds = 5;
std::string to_string(TrafficKind kind);

enum class Span { node, cross_node };  // the group's ranks share a node, or not
constexpr int kSpans = 2;
std::string to_string(Span span);

struct Traffic {
  using Counts = std::array<std::array<uint64_t, kTrafficKinds>, kSpans>;  // [Span][TrafficKind]
  Counts bytes{};
  Counts calls{};

  uint64_t bytes_of(TrafficKind kind) const;  // both spans
  uint64_t calls_of(TrafficKind kind) const;
  uint64_t bytes_of(TrafficKind kind, Span span) const { return bytes[index(span)][index(kind)]; }
  uint64_t calls_of(TrafficKind kind, Span span) const { return calls[index(span)][index(kind)]; }
  uint64_t total_bytes() const;
  uint64_t total_bytes(Span span) const;
  // One line per span with traffic: "node-local: all_gather 12 calls 3.1 MB, ...".
  std::string describe() const;

  static size_t index(Span s) { return static_cast<size_t>(s); }
  static size_t index(TrafficKind k) { return static_cast<size_t>(k); }
};

// Counted since the process started or the last reset_traffic().
Traffic traffic();
void reset_traffic();
// ProcessGroup's: one call of `kind` moving `buffer_bytes` over a group of `group_size` ranks.
// Returns the bytes it counted as this rank's.
uint64_t count_traffic(TrafficKind kind, uint64_t buffer_bytes, int group_size, Span span);

}  // namespace acc::dist
