#include "acc/memory/allocator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "acc/util/error.h"

namespace acc::memory {
namespace {

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

// Large freed blocks by rounded size, reused for the next request of that exact size.
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
      for (void* p : blocks) std::free(p);
    free_.clear();
    cached_ = 0;
  }
  int64_t cached() {
    std::lock_guard lock(mu_);
    return cached_;
  }

  // Ranks sharing this node's memory; the default capacity is half the physical memory over them.
  void share_among(int local_ranks) {
    const int64_t capacity = capacity_for(local_ranks);
    std::lock_guard lock(mu_);
    capacity_ = capacity;
    if (cached_ > capacity_) release_locked();
  }

 private:
  static int64_t capacity_for(int local_ranks) {
    const char* env = std::getenv("ACC_ALLOC_CACHE_MB");
    if (!env || !*env) {
      const int64_t physical = physical_memory_bytes();
      return physical > 0 ? physical / 2 / std::max(1, local_ranks) : int64_t{4096} << 20;
    }
    char* end = nullptr;
    const long long mb = std::strtoll(env, &end, 10);
    ACC_CHECK(end && *end == '\0' && mb >= 0, "ACC_ALLOC_CACHE_MB='", env,
              "' is not a size; expected a whole number of MiB (0 turns the cache off)");
    return static_cast<int64_t>(mb) << 20;
  }

  // Read when the cache is built, on the first large allocation (which may throw), never
  // first inside deallocate.
  int64_t capacity_ = capacity_for(1);
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  int64_t cached_ = 0;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: tensors may die after main
  return *c;
}

size_t rounded_size(size_t nbytes) {
  // aligned_alloc needs a multiple of the alignment; large blocks round to pages for reuse.
  const size_t unit = nbytes >= kCacheMinBytes ? 4096 : kAlignment;
  return nbytes == 0 ? kAlignment : (nbytes + unit - 1) / unit * unit;
}

std::array<Counter, kNumCategories> g_by_category;
Counter g_total;
thread_local Category t_category = Category::other;

}  // namespace

std::string_view category_name(Category c) {
  switch (c) {
    case Category::parameters: return "parameters";
    case Category::gradients: return "gradients";
    case Category::optimizer_state: return "optimizer_state";
    case Category::activations: return "activations";
    case Category::communication: return "communication";
    case Category::offload: return "offload";
    case Category::other: return "other";
  }
  return "unknown";
}

void* allocate(size_t nbytes, Category category) {
  const size_t rounded = rounded_size(nbytes);
  void* ptr = rounded >= kCacheMinBytes ? cache().take(rounded) : nullptr;
  if (!ptr) ptr = std::aligned_alloc(kAlignment, rounded);
  if (!ptr && cache().cached() > 0) {  // memory held for reuse is better spent here
    cache().release();
    ptr = std::aligned_alloc(kAlignment, rounded);
  }
  if (!ptr)
    ACC_FAIL("out of memory: could not allocate ", nbytes, " bytes for ", category_name(category),
             " (now live: ", g_total.usage().current, " bytes)");
  g_by_category[static_cast<size_t>(category)].add(static_cast<int64_t>(nbytes));
  g_total.add(static_cast<int64_t>(nbytes));
  return ptr;
}

void deallocate(void* ptr, size_t nbytes, Category category) noexcept {
  if (!ptr) return;
  const size_t rounded = rounded_size(nbytes);
  if (rounded < kCacheMinBytes || !cache().keep(ptr, rounded)) std::free(ptr);
  g_by_category[static_cast<size_t>(category)].add(-static_cast<int64_t>(nbytes));
  g_total.add(-static_cast<int64_t>(nbytes));
}

void count_external(Category category, int64_t bytes) noexcept {
  g_by_category[static_cast<size_t>(category)].add(bytes);
  g_total.add(bytes);
}

void release_cached() { cache().release(); }

void share_cache_among(int local_ranks) { cache().share_among(local_ranks); }

Category current_category() { return t_category; }

CategoryScope::CategoryScope(Category category) : previous_(t_category) { t_category = category; }
CategoryScope::~CategoryScope() { t_category = previous_; }

int64_t physical_memory_bytes() {
  const auto pages = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES));
  const auto page = static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
  return pages > 0 && page > 0 ? pages * page : 0;
}

Report report() {
  Report r;
  for (size_t i = 0; i < kNumCategories; ++i) r.by_category[i] = g_by_category[i].usage();
  r.total = g_total.usage();
  r.cached = cache().cached();
  return r;
}

void reset_peaks() {
  for (auto& c : g_by_category) c.reset_peak();
  g_total.reset_peak();
}

}  // namespace acc::memory
