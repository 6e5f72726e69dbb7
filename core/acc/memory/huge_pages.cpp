#include "acc/memory/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "acc/util/error.h"

namespace acc::memory::huge_pages {

bool enabled(const char* value) {
  if (!value || !*value) return true;
  ACC_CHECK(std::strcmp(value, "0") == 0 || std::strcmp(value, "1") == 0, "ACC_HUGE_PAGES='", value,
            "' is not 0 or 1 (0 maps large blocks in 4 KiB pages)");
  return value[0] == '1';
}

bool serves(size_t bytes) {
  static const bool on = enabled(std::getenv("ACC_HUGE_PAGES"));
  return on && bytes >= kBytes;
}

size_t round_up(size_t bytes) { return (bytes + kBytes - 1) / kBytes * kBytes; }

void* map(size_t bytes) noexcept {
  // Map enough to hold the block from the first 2 MiB boundary on (mmap's pages are 4 KiB
  // aligned, so that boundary is at most kBytes - 4 KiB in), then give back what lies before
  // it and after the block.
  const size_t span = bytes + kBytes - 4096;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t block = (begin + kBytes - 1) / kBytes * kBytes;
  if (block > begin) ::munmap(raw, block - begin);
  const uintptr_t end = begin + span, block_end = block + bytes;
  if (end > block_end) ::munmap(reinterpret_cast<void*>(block_end), end - block_end);
  // Advice only; a kernel without transparent huge pages leaves the block in 4 KiB pages.
  ::madvise(reinterpret_cast<void*>(block), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(block);
}

void unmap(void* block, size_t bytes) noexcept { ::munmap(block, bytes); }

}  // namespace acc::memory::huge_pages
