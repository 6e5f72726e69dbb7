#pragma once
// What the file memory tier (fsdp_offload_dir) costs while training, for the progress bar and
// the final line: the storage this process reads and writes per second (memory::storage_io),
// and its resident memory split into anonymous pages and the tier files' pages mapped in
// (memory::resident_kinds). Inactive, and silent, when the tier holds nothing.
#include <chrono>
#include <string>

#include "acc/memory/resident.h"

namespace acc::train {

class TierIoMeter {
 public:
  TierIoMeter();  // starts counting now if the file tier holds memory
  bool active() const { return active_; }
  // " disk r=12 w=30 MB/s": the rates since the last call (or the start); "" when inactive.
  std::string rates();
  // "offload files (fsdp_offload_dir): 512 MiB mapped in, 1.2 GiB anonymous; read 3.1 GiB,
  // wrote 2.9 GiB from storage over the run"; "" when inactive.
  std::string summary() const;

 private:
  bool active_ = false;
  memory::StorageIo start_io_, last_io_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace acc::train
