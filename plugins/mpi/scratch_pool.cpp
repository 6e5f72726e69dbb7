#include "scratch_pool.h"

#include <map>
#include <mutex>

#include "acc/memory/allocator.h"

namespace acc::mpi {
namespace {
// Free buffers kept beyond this many bytes are released instead of pooled.
constexpr size_t kMaxPooledBytes = size_t{2} << 30;
constexpr auto kCategory = memory::Category::communication;
}  // namespace

struct ScratchPool::State {
  std::mutex mutex;
  std::multimap<size_t, void*> free;  // capacity -> buffer
  size_t free_bytes = 0;

  ~State() {
    for (auto [bytes, p] : free) memory::deallocate(p, bytes, kCategory);
  }
};

ScratchPool::ScratchPool() : state_(std::make_shared<State>()) {}
ScratchPool::~ScratchPool() = default;

std::shared_ptr<void> ScratchPool::acquire(size_t bytes) {
  void* p = nullptr;
  size_t capacity = bytes;
  {
    std::lock_guard lock(state_->mutex);
    // The smallest free buffer that fits, unless it would waste more than half of itself.
    auto it = state_->free.lower_bound(bytes);
    if (it != state_->free.end() && it->first <= 2 * bytes + 4096) {
      capacity = it->first;
      p = it->second;
      state_->free_bytes -= capacity;
      state_->free.erase(it);
    }
  }
  if (!p) p = memory::allocate(capacity, kCategory);
  return std::shared_ptr<void>(p, [state = state_, capacity](void* q) {
    std::lock_guard lock(state->mutex);
    if (state->free_bytes + capacity > kMaxPooledBytes) {
      memory::deallocate(q, capacity, kCategory);
      return;
    }
    state->free.emplace(capacity, q);
    state->free_bytes += capacity;
  });
}

}  // namespace acc::mpi
