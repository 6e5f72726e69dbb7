#pragma once
// Large blocks straight from the kernel, starting on a 2 MiB boundary, a whole number of 2 MiB
// pages long and advised as transparent huge pages (MADV_HUGEPAGE). Every tensor the block cache
// cannot reuse (a resume's optimizer state, a first step's activations and gradients) is fresh
// memory, and its first touch is one page fault per page: 0.5 s per GB in 4 KiB pages on the
// Intel Xeon VM, 2.9 s per GB on the AMD EPYC one (whose MMU is paravirtualised: a fault costs
// ~11 us), against 0.07-0.17 s per GB in 2 MiB pages. On that VM a block's last partial 2 MiB
// left in 4 KiB pages cost as much as the whole rest of the block (see round_up), so blocks are
// whole huge pages. ACC_HUGE_PAGES=0 turns this off (plain malloc blocks).
#include <cstddef>

namespace acc::memory::huge_pages {

inline constexpr size_t kBytes = size_t{2} << 20;

// ACC_HUGE_PAGES's value (unset or empty: on) read as on or off; any other value than 0 or 1
// is an error naming the variable.
bool enabled(const char* value);
// Whether blocks of `bytes` come from map(): at least one huge page, unless ACC_HUGE_PAGES=0.
// The first call reads the variable.
bool serves(size_t bytes);
// `bytes` rounded up to whole huge pages: what the allocator asks map() for. On the AMD EPYC
// VM, leaving each block's last partial huge page in 4 KiB pages made a resume's load of GPT-2
// small's optimizer state take twice as long (0.54 against 0.25 s) and a bf16 training step 7%
// longer; the rounding costs at most 2 MiB - 4 KiB a block (GPT-2 small training: 2.3% of its
// resident memory). PyTorch's CUDA caching allocator rounds its large blocks the same way.
size_t round_up(size_t bytes);
// A block of `bytes` (a whole number of huge pages) at a 2 MiB boundary, advised as huge pages.
// nullptr when the system will not map it.
void* map(size_t bytes) noexcept;
void unmap(void* block, size_t bytes) noexcept;

}  // namespace acc::memory::huge_pages
