#include "acc/train/tier_io_meter.h"

#include <cstdio>

#include "acc/estimate/memory_estimate.h"
#include "acc/memory/allocator.h"

namespace acc::train {

TierIoMeter::TierIoMeter()
    : active_(memory::report()[memory::Tier::file].current > 0),
      start_io_(active_ ? memory::storage_io() : memory::StorageIo{}),
      last_io_(start_io_),
      last_(std::chrono::steady_clock::now()) {}

std::string TierIoMeter::rates() {
  if (!active_) return "";
  const auto io = memory::storage_io();
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::max(1e-9, std::chrono::duration<double>(now - last_).count());
  char text[64];
  std::snprintf(text, sizeof text, " disk r=%.0f w=%.0f MB/s", static_cast<double>(io.read - last_io_.read) / seconds / 1e6,
                static_cast<double>(io.written - last_io_.written) / seconds / 1e6);
  last_io_ = io;
  last_ = now;
  return text;
}

std::string TierIoMeter::summary() const {
  if (!active_) return "";
  const auto kinds = memory::resident_kinds();
  const auto io = memory::storage_io();
  return "offload files (fsdp_offload_dir): " + estimate::format_bytes(kinds.file_tier) + " mapped in, " +
         estimate::format_bytes(kinds.anonymous) + " anonymous; read " + estimate::format_bytes(io.read - start_io_.read) +
         ", wrote " + estimate::format_bytes(io.written - start_io_.written) + " from storage over the run";
}

}  // namespace acc::train
