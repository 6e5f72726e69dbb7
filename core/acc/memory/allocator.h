#pragma once
// The one allocator behind every tensor. It hands out 64-byte aligned blocks and counts the
// requested bytes, current and peak, per category and per tier, so that memory claims (ZeRO
// formulas per rank, what offload moves) can be checked exactly. The category and tier of an
// allocation are the innermost active CategoryScope and TierScope on the allocating thread.
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

namespace acc::memory {

enum class Category : uint8_t {
  parameters,
  gradients,
  optimizer_state,
  activations,
  communication,
  checkpoint,  // the host copy an asynchronous save writes from (checkpoint::save_async)
  other,
};
inline constexpr size_t kNumCategories = 7;
inline constexpr size_t kAlignment = 64;

std::string_view category_name(Category c);

// Where a block lives. On a GPU machine the compute tier would be device memory; on this CPU
// build every tier is host memory, and what the tiers give is the split: a strategy that
// offloads (fsdp_offload_params) puts its master parameters, their gradients and the optimizer
// state in the offload tier, and the report shows what is left for computing.
//   compute  gathered parameters, activations, communication buffers (the default)
//   offload  host memory set aside for the optimizer's side of training
//   file     pages of files under the file tier's directory (offload_dir), mapped shared: the
//            kernel writes them back to disk, and page_out() drops them from this process's
//            resident memory between uses
enum class Tier : uint8_t { compute, offload, file };
inline constexpr size_t kNumTiers = 3;
std::string_view tier_name(Tier t);

// Allocates nbytes (0 allowed) aligned to kAlignment, counted under `category` and `tier`.
// The file tier needs set_file_tier_dir() first; a full disk is an error naming the directory.
// File-tier blocks start zeroed (a new file reads as zeros).
void* allocate(size_t nbytes, Category category, Tier tier = Tier::compute);
// Releases a block from allocate(); nbytes, category and tier must be those it was allocated
// with.
void deallocate(void* ptr, size_t nbytes, Category category, Tier tier = Tier::compute) noexcept;

// The directory file-tier blocks are created in (each block its own file, unlinked at once, so
// nothing is left behind however the process ends). Checks that it is a writable directory and
// has at least `reserve_bytes` free, with an error naming the path otherwise. From then on the
// cache of freed blocks keeps at most 256 MiB (unless ACC_ALLOC_CACHE_MB sets it), and malloc
// maps blocks of 1 MiB and more on their own, so that freeing them returns them at once.
void set_file_tier_dir(const std::filesystem::path& dir, int64_t reserve_bytes = 0);
// What that cache may then hold in each of `local_ranks` processes on a node: freed blocks kept
// resident beside the state (the memory estimate counts them for plans with files).
int64_t file_tier_cache_bytes(int local_ranks);
// Drops the whole pages inside [ptr, ptr + nbytes) of a file-tier block from this process's
// resident memory; their contents stay in the file (read back on the next touch). Does nothing
// for other tiers.
void page_out(const void* ptr, size_t nbytes, Tier tier) noexcept;
// Copies nbytes at `at`, inside a block of `tier`, into dst (read_block) or from src
// (write_block). A file-tier block is read and written through its file, not its mapping: no
// page is mapped into the process, and none needs page_out() after.
void read_block(const void* at, size_t nbytes, void* dst, Tier tier);
void write_block(void* at, size_t nbytes, const void* src, Tier tier);
// Copies nbytes between two blocks of `tier`; file to file in the kernel for the file tier.
void copy_block(void* to, const void* from, size_t nbytes, Tier tier);
// Sets [ptr, ptr + nbytes) of a block of `tier` to zeros; in the file tier without reading or
// writing its whole pages (see file_tier::zero).
void zero(void* ptr, size_t nbytes, Tier tier) noexcept;

// Counts memory acc holds outside allocate(), such as a mapped shared-memory segment:
// count_external(c, +bytes) when it is mapped, count_external(c, -bytes) when unmapped.
void count_external(Category category, int64_t bytes) noexcept;

// The category new allocations on this thread are counted under (default: other).
Category current_category();
// The tier new tensors on this thread are placed in (default: compute).
Tier current_tier();

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

// RAII: tensors created on this thread inside the scope are placed in `tier`.
class TierScope {
 public:
  explicit TierScope(Tier tier);
  ~TierScope();
  TierScope(const TierScope&) = delete;
  TierScope& operator=(const TierScope&) = delete;

 private:
  Tier previous_;
};

struct Usage {
  int64_t current = 0;  // bytes live now
  int64_t peak = 0;     // highest `current` since the last reset_peaks()
};

struct Report {
  std::array<Usage, kNumCategories> by_category{};  // over every tier
  std::array<Usage, kNumTiers> by_tier{};            // over every category
  std::array<std::array<Usage, kNumCategories>, kNumTiers> by_tier_category{};
  Usage total;         // peak of the sum, not the sum of peaks
  int64_t cached = 0;  // freed large blocks kept for reuse (not live, not in any category)
  // Bytes live blocks hold beyond what was asked for: large blocks round up to whole pages, of
  // 2 MiB when they are huge pages (huge_pages.h). Resident, in no category.
  Usage rounding;
  const Usage& operator[](Category c) const { return by_category[static_cast<size_t>(c)]; }
  const Usage& operator[](Tier t) const { return by_tier[static_cast<size_t>(t)]; }
  const Usage& at(Tier t, Category c) const {
    return by_tier_category[static_cast<size_t>(t)][static_cast<size_t>(c)];
  }
};

Report report();
// This machine's physical memory in bytes (0 when the system does not say).
int64_t physical_memory_bytes();
// Freed blocks of at least kCacheMinBytes are kept and handed out again for a request of the
// same rounded size: a training step allocates the same large activations every step, and
// fresh blocks from the OS are page-faulted and zeroed each time. The cache holds up to
// ACC_ALLOC_CACHE_MB MiB (0 = off); by default half the physical memory, shared among the
// ranks of this node (acc::init calls share_cache_among). release_cached() returns them all.
// Blocks of 2 MiB and more come from huge_pages::map, rounded up to whole 2 MiB pages
// (huge_pages.h; ACC_HUGE_PAGES=0 gives them to malloc too), the rest from malloc.
inline constexpr size_t kCacheMinBytes = size_t{1} << 20;
void share_cache_among(int local_ranks);
void release_cached();

// Sets every peak to the current value, so the next phase's peaks can be measured.
void reset_peaks();

}  // namespace acc::memory
