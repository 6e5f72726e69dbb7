#include "acc/memory/prefault.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL and nothing is done
#endif

namespace acc::memory {

namespace {

// Pages made present per call, so that a stop request is seen soon.
constexpr uintptr_t kStep = uintptr_t{4} << 20;

}  // namespace

Prefault::Prefault(std::vector<Region> regions)
    : thread_([this, regions = std::move(regions)] { run(regions); }) {}

Prefault::~Prefault() {
  stop_.store(true, std::memory_order_relaxed);
  thread_.join();
}

void Prefault::run(const std::vector<Region>& regions) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (const Region& region : regions) {
    // The pages the region touches: its first and last may hold other live bytes, which
    // MADV_POPULATE_WRITE leaves as they are (a plain write here could race with the reader).
    const auto begin = reinterpret_cast<uintptr_t>(region.data) / page * page;
    const auto end = (reinterpret_cast<uintptr_t>(region.data) + region.bytes + page - 1) / page * page;
    for (uintptr_t at = begin; at < end; at += kStep) {
      if (stop_.load(std::memory_order_relaxed)) return;
      const uintptr_t n = std::min(kStep, end - at);
      if (::madvise(reinterpret_cast<void*>(at), n, MADV_POPULATE_WRITE) != 0) return;
      done_.fetch_add(n, std::memory_order_relaxed);
    }
  }
}

}  // namespace acc::memory
