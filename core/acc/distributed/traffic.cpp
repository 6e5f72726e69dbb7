#include "acc/distributed/traffic.h"

#include <atomic>

namespace acc::dist {
namespace {

std::array<std::atomic<uint64_t>, kTrafficKinds> g_bytes{};
std::array<std::atomic<uint64_t>, kTrafficKinds> g_calls{};

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

uint64_t Traffic::total_bytes() const {
  uint64_t sum = 0;
  for (uint64_t b : bytes) sum += b;
  return sum;
}

Traffic traffic() {
  Traffic t;
  for (int k = 0; k < kTrafficKinds; ++k) {
    t.bytes[k] = g_bytes[k].load(std::memory_order_relaxed);
    t.calls[k] = g_calls[k].load(std::memory_order_relaxed);
  }
  return t;
}

void reset_traffic() {
  for (int k = 0; k < kTrafficKinds; ++k) {
    g_bytes[k].store(0, std::memory_order_relaxed);
    g_calls[k].store(0, std::memory_order_relaxed);
  }
}

void count_traffic(TrafficKind kind, uint64_t buffer_bytes, int group_size) {
  const uint64_t n = static_cast<uint64_t>(group_size);
  uint64_t sent = kind == TrafficKind::send ? buffer_bytes : buffer_bytes * (n - 1) / n;
  if (kind == TrafficKind::all_reduce) sent *= 2;  // a reduce-scatter, then an all-gather
  const int k = static_cast<int>(kind);
  g_bytes[k].fetch_add(sent, std::memory_order_relaxed);
  g_calls[k].fetch_add(1, std::memory_order_relaxed);
}

}  // namespace acc::dist
