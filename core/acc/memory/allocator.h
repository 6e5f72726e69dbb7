#pragma once
// The one allocator behind every tensor. It hands out 64-byte aligned blocks and counts the
// requested bytes, current and peak, per category, so that memory claims (ZeRO formulas per
// rank) can be checked exactly. The category of an allocation is the innermost active
// CategoryScope on the allocating thread.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace acc::memory {

enum class Category : uint8_t {
  parameters,
  gradients,
  optimizer_state,
  activations,
  communication,
  offload,
  other,
};
inline constexpr size_t kNumCategories = 7;
inline constexpr size_t kAlignment = 64;

std::string_view category_name(Category c);

// Allocates nbytes (0 allowed) aligned to kAlignment, counted under `category`.
void* allocate(size_t nbytes, Category category);
// Releases a block from allocate(); nbytes and category must be those it was allocated with.
void deallocate(void* ptr, size_t nbytes, Category category) noexcept;

// Counts memory acc holds outside allocate(), such as a mapped shared-memory segment:
// count_external(c, +bytes) when it is mapped, count_external(c, -bytes) when unmapped.
void count_external(Category category, int64_t bytes) noexcept;

// The category new allocations on this thread are counted under (default: other).
Category current_category();

// RAII: allocations on this thread inside the scope are counted under `category`.
class CategoryScope {
 public:
  explicit CategoryScope(Category category);
  ~CategoryScope();
  CategoryScope(const CategoryScope&) = delete;
  CategoryScope& operator=(const CategoryScope&) = delete;

 private:
  Category previous_;
};

struct Usage {
  int64_t current = 0;  // bytes live now
  int64_t peak = 0;     // highest `current` since the last reset_peaks()
};

struct Report {
  std::array<Usage, kNumCategories> by_category{};
  Usage total;         // peak of the sum, not the sum of peaks
  int64_t cached = 0;  // freed large blocks kept for reuse (not live, not in any category)
  const Usage& operator[](Category c) const { return by_category[static_cast<size_t>(c)]; }
};

Report report();
// This machine's physical memory in bytes (0 when the system does not say).
int64_t physical_memory_bytes();
// Freed blocks of at least kCacheMinBytes are kept and handed out again for a request of the
// same rounded size: a training step allocates the same large activations every step, and
// fresh blocks from the OS are page-faulted and zeroed each time. The cache holds up to
// ACC_ALLOC_CACHE_MB MiB (0 = off); by default half the physical memory, shared among the
// ranks of this node (acc::init calls share_cache_among). release_cached() returns them all.
inline constexpr size_t kCacheMinBytes = size_t{1} << 20;
void share_cache_among(int local_ranks);
void release_cached();

// Sets every peak to the current value, so the next phase's peaks can be measured.
void reset_peaks();

}  // namespace acc::memory
