#include "acc/memory/allocator.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "acc/memory/file_tier.h"
#include "acc/memory/huge_pages.h"
#include "acc/util/error.h"

namespace acc::memory {
namespace {

// Blocks from the system: huge-page blocks for the large ones (huge_pages.h), malloc's below.
void* system_allocate(size_t rounded) {
  return huge_pages::serves(rounded) ? huge_pages::map(rounded) : std::aligned_alloc(kAlignment, rounded);
}
// serves() cannot throw here: a block to free means allocate() ran, and its first call read
// ACC_HUGE_PAGES (or threw before any block was made).
void system_free(void* ptr, size_t rounded) noexcept {
  if (huge_pages::serves(rounded))
    huge_pages::unmap(ptr, rounded);
  else
    std::free(ptr);
}

struct Counter {
  std::atomic<int64_t> current{0};
  std::atomic<int64_t> peak{0};

  void add(int64_t delta) {
    const int64_t now = current.fetch_add(delta, std::memory_order_relaxed) + delta;
    int64_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  Usage usage() const {
    return {current.load(std::memory_order_relaxed), peak.load(std::memory_order_relaxed)};
  }
  void reset_peak() { peak.store(current.load(std::memory_order_relaxed), std::memory_order_relaxed); }
};

// Large freed blocks by rounded size, reused for the next request of that rounded size.
class BlockCache {
 public:
  void* take(size_t rounded) {
    std::lock_guard lock(mu_);
    auto it = free_.find(rounded);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= static_cast<int64_t>(rounded);
    return p;
  }
  // Called from the noexcept deallocate: a failure to record the block just frees it.
  bool keep(void* p, size_t rounded) noexcept {
    std::lock_guard lock(mu_);
    if (cached_ + static_cast<int64_t>(rounded) > capacity_) return false;
    try {
      free_[rounded].push_back(p);
    } catch (const std::bad_alloc&) {
      return false;
    }
    cached_ += static_cast<int64_t>(rounded);
    return true;
  }
  void release() {
    std::lock_guard lock(mu_);
    release_locked();
  }
  void release_locked() {
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) system_free(p, size);
    free_.clear();
    cached_ = 0;
  }
  int64_t cached() {
    std::lock_guard lock(mu_);
    return cached_;
  }

  // Ranks sharing this node's memory; the default capacity is half the physical memory over them.
  void share_among(int local_ranks) {
    std::lock_guard lock(mu_);
    local_ranks_ = local_ranks;
    resize_locked();
  }
  // The default capacity is at most `bytes` from now on (ACC_ALLOC_CACHE_MB still sets it).
  void cap(int64_t bytes) {
    std::lock_guard lock(mu_);
    cap_ = bytes;
    resize_locked();
  }

  // The capacity with at most `cap` by default, ACC_ALLOC_CACHE_MB's when set.
  static int64_t capacity_for(int local_ranks, int64_t cap) {
    const char* env = std::getenv("ACC_ALLOC_CACHE_MB");
    if (!env || !*env) {
      const int64_t physical = physical_memory_bytes();
      return std::min(cap, physical > 0 ? physical / 2 / std::max(1, local_ranks) : int64_t{4096} << 20);
    }
    char* end = nullptr;
    const long long mb = std::strtoll(env, &end, 10);
    ACC_CHECK(end && *end == '\0' && mb >= 0, "ACC_ALLOC_CACHE_MB='", env,
              "' is not a size; expected a whole number of MiB (0 turns the cache off)");
    return static_cast<int64_t>(mb) << 20;
  }

 private:
  void resize_locked() {
    capacity_ = capacity_for(local_ranks_, cap_);
    if (cached_ > capacity_) release_locked();
  }

  int local_ranks_ = 1;
  int64_t cap_ = std::numeric_limits<int64_t>::max();  // on the default (cap())
  // Read when the cache is built, on the first large allocation (which may throw), never
  // first inside deallocate.
  int64_t capacity_ = capacity_for(local_ranks_, cap_);
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  int64_t cached_ = 0;
};

// The cache's default capacity once state lives in files (set_file_tier_dir).
constexpr int64_t kFileTierCacheCap = int64_t{256} << 20;

BlockCache& cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: tensors may die after main
  return *c;
}

size_t rounded_size(size_t nbytes) {
  // aligned_alloc needs a multiple of the alignment; large blocks round to pages for reuse,
  // those of huge pages to whole huge pages.
  const size_t unit = nbytes >= kCacheMinBytes ? 4096 : kAlignment;
  const size_t rounded = nbytes == 0 ? kAlignment : (nbytes + unit - 1) / unit * unit;
  return huge_pages::serves(rounded) ? huge_pages::round_up(rounded) : rounded;
}

std::array<Counter, kNumCategories> g_by_category;
std::array<Counter, kNumTiers> g_by_tier;
std::array<std::array<Counter, kNumCategories>, kNumTiers> g_by_tier_category;
Counter g_total;
Counter g_rounding;
thread_local Category t_category = Category::other;
thread_local Tier t_tier = Tier::compute;

void count(Category category, Tier tier, int64_t bytes) noexcept {
  const auto c = static_cast<size_t>(category), t = static_cast<size_t>(tier);
  g_by_category[c].add(bytes);
  g_by_tier[t].add(bytes);
  g_by_tier_category[t][c].add(bytes);
  g_total.add(bytes);
}

}  // namespace

std::string_view category_name(Category c) {
  switch (c) {
    case Category::parameters: return "parameters";
    case Category::gradients: return "gradients";
    case Category::optimizer_state: return "optimizer_state";
    case Category::activations: return "activations";
    case Category::communication: return "communication";
    case Category::checkpoint: return "checkpoint";
    case Category::other: return "other";
  }
  return "unknown";
}

std::string_view tier_name(Tier t) {
  switch (t) {
    case Tier::compute: return "compute";
    case Tier::offload: return "offload";
    case Tier::file: return "file";
  }
  return "unknown";
}

void* allocate(size_t nbytes, Category category, Tier tier) {
  if (tier == Tier::file) {
    void* p = file_tier::map(nbytes);
    count(category, tier, static_cast<int64_t>(nbytes));
    return p;
  }
  // Beyond this no block can exist, and rounding up would wrap around.
  ACC_CHECK(nbytes <= std::numeric_limits<size_t>::max() / 2, "out of memory: ", nbytes, " bytes asked for ",
            category_name(category));
  const size_t rounded = rounded_size(nbytes);
  void* ptr = rounded >= kCacheMinBytes ? cache().take(rounded) : nullptr;
  if (!ptr) ptr = system_allocate(rounded);
  if (!ptr && cache().cached() > 0) {  // memory held for reuse is better spent here
    cache().release();
    ptr = system_allocate(rounded);
  }
  if (!ptr)
    ACC_FAIL("out of memory: could not allocate ", nbytes, " bytes for ", category_name(category),
             " (now live: ", g_total.usage().current, " bytes)");
  count(category, tier, static_cast<int64_t>(nbytes));
  g_rounding.add(static_cast<int64_t>(rounded - nbytes));
  return ptr;
}

void deallocate(void* ptr, size_t nbytes, Category category, Tier tier) noexcept {
  if (!ptr) return;
  if (tier == Tier::file) {
    file_tier::unmap(ptr, nbytes);
  } else {
    const size_t rounded = rounded_size(nbytes);
    if (rounded < kCacheMinBytes || !cache().keep(ptr, rounded)) system_free(ptr, rounded);
    g_rounding.add(-static_cast<int64_t>(rounded - nbytes));
  }
  count(category, tier, -static_cast<int64_t>(nbytes));
}

void count_external(Category category, int64_t bytes) noexcept {
  count(category, Tier::compute, bytes);
}

void set_file_tier_dir(const std::filesystem::path& dir, int64_t reserve_bytes) {
  file_tier::set_dir(dir, reserve_bytes);
  // State goes to files because memory is short: freed blocks kept for reuse would hold what
  // offloading saved (GPT-2 XL at 4 ranks: 10.8 GiB resident with the default cache, 7.7 GiB
  // with 256 MiB, at the same step time). For the same reason blocks of 1 MiB and more come
  // from mmap and go back to the system when freed: glibc's own threshold rises as such blocks
  // are freed, and then keeps them in its heap (GPT-2 medium, 2 ranks: 2707 -> 2010 MiB).
  cache().cap(kFileTierCacheCap);
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
}

int64_t file_tier_cache_bytes(int local_ranks) { return BlockCache::capacity_for(local_ranks, kFileTierCacheCap); }

void page_out(const void* ptr, size_t nbytes, Tier tier) noexcept {
  if (tier == Tier::file) file_tier::page_out(ptr, nbytes);
}

void read_block(const void* at, size_t nbytes, void* dst, Tier tier) {
  if (tier == Tier::file)
    file_tier::read(at, nbytes, dst);
  else
    std::memcpy(dst, at, nbytes);
}

void write_block(void* at, size_t nbytes, const void* src, Tier tier) {
  if (tier == Tier::file)
    file_tier::write(at, nbytes, src);
  else
    std::memcpy(at, src, nbytes);
}

void copy_block(void* to, const void* from, size_t nbytes, Tier tier) {
  if (tier == Tier::file)
    file_tier::copy(to, from, nbytes);
  else
    std::memcpy(to, from, nbytes);
}

void zero(void* ptr, size_t nbytes, Tier tier) noexcept {
  if (tier == Tier::file)
    file_tier::zero(ptr, nbytes);
  else
    std::memset(ptr, 0, nbytes);
}

void release_cached() { cache().release(); }

void share_cache_among(int local_ranks) { cache().share_among(local_ranks); }

Category current_category() { return t_category; }

CategoryScope::CategoryScope(Category category) : previous_(t_category) { t_category = category; }
CategoryScope::~CategoryScope() { t_category = previous_; }

Tier current_tier() { return t_tier; }

TierScope::TierScope(Tier tier) : previous_(t_tier) { t_tier = tier; }
TierScope::~TierScope() { t_tier = previous_; }

int64_t physical_memory_bytes() {
  const auto pages = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES));
  const auto page = static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
  return pages > 0 && page > 0 ? pages * page : 0;
}

Report report() {
  Report r;
  for (size_t i = 0; i < kNumCategories; ++i) r.by_category[i] = g_by_category[i].usage();
  for (size_t t = 0; t < kNumTiers; ++t) {
    r.by_tier[t] = g_by_tier[t].usage();
    for (size_t i = 0; i < kNumCategories; ++i)
      r.by_tier_category[t][i] = g_by_tier_category[t][i].usage();
  }
  r.total = g_total.usage();
  r.cached = cache().cached();
  r.rounding = g_rounding.usage();
  return r;
}

void reset_peaks() {
  for (auto& c : g_by_category) c.reset_peak();
  for (auto& t : g_by_tier) t.reset_peak();
  for (auto& tier : g_by_tier_category)
    for (auto& c : tier) c.reset_peak();
  g_total.reset_peak();
  g_rounding.reset_peak();
}

}  // namespace acc::memory
