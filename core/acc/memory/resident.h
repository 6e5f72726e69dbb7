#pragma once
// This process's resident memory as the kernel counts it (/proc/self/status), next to the
// allocator's own counts: what offloading to files saves shows only here.
#include <cstdint>

namespace acc::memory {

int64_t resident_bytes();       // VmRSS now
int64_t peak_resident_bytes();  // VmHWM: the highest VmRSS since start or the last reset
int64_t data_bytes();           // VmData: private writable memory, what RLIMIT_DATA is held against
// Sets the peak to the current resident size (/proc/self/clear_refs), so one phase's peak can
// be measured; false when the kernel does not allow it.
bool reset_peak_resident();
// Starts measuring one phase: returns the allocator's cached blocks and malloc's free memory to
// the system (what earlier phases freed must not count), resets the peak, and returns VmRSS
// now, the baseline to read the phase's peak_resident_bytes() against (-1 when the peak
// cannot be reset).
int64_t begin_resident_phase();

// Resident memory by what backs it: anonymous pages (the heap, the compute and offload tiers;
// /proc/self/status RssAnon) and the pages of the file tier's files (fsdp_offload_dir) mapped
// in now (/proc/self/smaps), which the kernel may drop and read back from the disk.
struct ResidentKinds {
  int64_t anonymous = 0;
  int64_t file_tier = 0;
};
ResidentKinds resident_kinds();

// Bytes this process made the kernel read from and write to storage since it started
// (/proc/self/io): with fsdp_offload_dir, mostly the file tier's paging.
struct StorageIo {
  int64_t read = 0;
  int64_t written = 0;
};
StorageIo storage_io();

}  // namespace acc::memory
