#pragma once
// Large blocks straight from the kernel, starting on a 2 MiB boundary and advised as
// transparent huge pages (MADV_HUGEPAGE). Every tensor the block cache cannot reuse (a resume's
// optimizer state, a first step's activations and gradients) is fresh memory, and its first
// touch is one page fault per page: 0.5 s per GB in 4 KiB pages on the Intel Xeon VM, 2.9 s
// per GB on the AMD EPYC one (whose MMU is paravirtualised: a fault costs ~11 us), against
// 0.07-0.17 s per GB in 2 MiB pages. ACC_HUGE_PAGES=0 turns this off (plain malloc blocks).
#include <cstddef>

namespace acc::memory::huge_pages {

inline constexpr size_t kBytes = size_t{2} << 20;

// ACC_HUGE_PAGES's value (unset or empty: on) read as on or off; any other value than 0 or 1
// is an error naming the variable.
bool enabled(const char* value);
// Whether blocks of `bytes` come from map(): at least one huge page, unless ACC_HUGE_PAGES=0.
// The first call reads the variable.
bool serves(size_t bytes);
// A block of `bytes` (a multiple of the 4 KiB page) at a 2 MiB boundary; the huge pages it
// wholly covers are advised, its last partial one is left to 4 KiB pages (no resident bytes
// beyond the block). nullptr when the system will not map it.
void* map(size_t bytes) noexcept;
void unmap(void* block, size_t bytes) noexcept;

}  // namespace acc::memory::huge_pages
