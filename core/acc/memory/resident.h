#pragma once
// This process's resident memory as the kernel counts it (/proc/self/status), next to the
// allocator's own counts: what offloading to files saves shows only here.
#include <cstdint>

namespace acc::memory {

int64_t resident_bytes();       // VmRSS now
int64_t peak_resident_bytes();  // VmHWM: the highest VmRSS since start or the last reset
// Sets the peak to the current resident size (/proc/self/clear_refs), so one phase's peak can
// be measured; false when the kernel does not allow it.
bool reset_peak_resident();
// Starts measuring one phase: returns the allocator's cached blocks and malloc's free memory to
// the system (what earlier phases freed must not count), resets the peak, and returns VmRSS
// now, the baseline to read the phase's peak_resident_bytes() against (-1 when the peak
// cannot be reset).
int64_t begin_resident_phase();

}  // namespace acc::memory
