#include "acc/memory/allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>

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
  // aligned_alloc needs a size that is a multiple of the alignment; the counters see nbytes.
  const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (!ptr)
    ACC_FAIL("out of memory: could not allocate ", nbytes, " bytes for ", category_name(category),
             " (now live: ", g_total.usage().current, " bytes)");
  g_by_category[static_cast<size_t>(category)].add(static_cast<int64_t>(nbytes));
  g_total.add(static_cast<int64_t>(nbytes));
  return ptr;
}

void deallocate(void* ptr, size_t nbytes, Category category) noexcept {
  if (!ptr) return;
  std::free(ptr);
  g_by_category[static_cast<size_t>(category)].add(-static_cast<int64_t>(nbytes));
  g_total.add(-static_cast<int64_t>(nbytes));
}

Category current_category() { return t_category; }

CategoryScope::CategoryScope(Category category) : previous_(t_category) { t_category = category; }
CategoryScope::~CategoryScope() { t_category = previous_; }

Report report() {
  Report r;
  for (size_t i = 0; i < kNumCategories; ++i) r.by_category[i] = g_by_category[i].usage();
  r.total = g_total.usage();
  return r;
}

void reset_peaks() {
  for (auto& c : g_by_category) c.reset_peak();
  g_total.reset_peak();
}

}  // namespace acc::memory
