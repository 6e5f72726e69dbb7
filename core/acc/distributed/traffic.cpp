#include "acc/distributed/traffic.h"

#include <atomic>
#include <cstdio>

namespace acc::dist {
namespace {

using AtomicCounts = std::array<std::array<std::atomic<uint64_t>, kTrafficKinds>, kSpans>;
AtomicCounts g_bytes{};
AtomicCounts g_calls{};

}  // namespace

std::string to_string(TrafficKind kind) {
  switch (kind) {
    case TrafficKind::all_gather: return "all_gather";
    case TrafficKind::reduce_scatter: return "reduce_scatter";
    case TrafficKind::all_reduce: return "all_reduce";
    case TrafficKind::broadcast: return "broadcast";
    case TrafficKind::send: return "send";
  }
  return "?";
}

std::string to_string(Span span) { return span == Span::node ? "node-local" : "cross-node"; }

uint64_t Traffic::bytes_of(TrafficKind kind) const {
  return bytes_of(kind, Span::node) + bytes_of(kind, Span::cross_node);
}

uint64_t Traffic::calls_of(TrafficKind kind) const {
  return calls_of(kind, Span::node) + calls_of(kind, Span::cross_node);
}

uint64_t Traffic::total_bytes(Span span) const {
  uint64_t sum = 0;
  for (uint64_t b : bytes[index(span)]) sum += b;
  return sum;
}

uint64_t Traffic::total_bytes() const { return total_bytes(Span::node) + total_bytes(Span::cross_node); }

std::string Traffic::describe() const {
  std::string out;
  for (Span span : {Span::node, Span::cross_node}) {
    std::string line;
    for (int k = 0; k < kTrafficKinds; ++k) {
      const auto kind = static_cast<TrafficKind>(k);
      if (calls_of(kind, span) == 0) continue;
      char part[96];
      std::snprintf(part, sizeof part, "%s %llu calls %.1f MB", to_string(kind).c_str(),
                    static_cast<unsigned long long>(calls_of(kind, span)), bytes_of(kind, span) / 1e6);
      if (!line.empty()) line.append(", ");
      line.append(part);
    }
    if (line.empty()) continue;
    if (!out.empty()) out.append("\n");
    out.append(to_string(span)).append(": ").append(line);
  }
  return out;
}

Traffic traffic() {
  Traffic t;
  for (int s = 0; s < kSpans; ++s)
    for (int k = 0; k < kTrafficKinds; ++k) {
      t.bytes[s][k] = g_bytes[s][k].load(std::memory_order_relaxed);
      t.calls[s][k] = g_calls[s][k].load(std::memory_order_relaxed);
    }
  return t;
}

void reset_traffic() {
  for (int s = 0; s < kSpans; ++s)
    for (int k = 0; k < kTrafficKinds; ++k) {
      g_bytes[s][k].store(0, std::memory_order_relaxed);
      g_calls[s][k].store(0, std::memory_order_relaxed);
    }
}

uint64_t count_traffic(TrafficKind kind, uint64_t buffer_bytes, int group_size, Span span) {
  const uint64_t n = static_cast<uint64_t>(group_size);
  uint64_t sent = kind == TrafficKind::send ? buffer_bytes : buffer_bytes * (n - 1) / n;
  if (kind == TrafficKind::all_reduce) sent *= 2;  // a reduce-scatter, then an all-gather
  const size_t s = Traffic::index(span), k = Traffic::index(kind);
  g_bytes[s][k].fetch_add(sent, std::memory_order_relaxed);
  g_calls[s][k].fetch_add(1, std::memory_order_relaxed);
  return sent;
}

}  // namespace acc::dist
