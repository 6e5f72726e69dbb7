#pragma once
// Removable hook lists shared by autograd (tensor and leaf hooks) and nn::Module (call-boundary
// hooks). A HookHandle removes its hook; it stays valid (and harmless) after the owner is gone.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace acc::autograd {

class HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(std::function<void()> remover) : remover_(std::move(remover)) {}
  // Removes the hook; later calls do nothing.
  void remove() {
    if (remover_) std::exchange(remover_, nullptr)();
  }

 private:
  std::function<void()> remover_;
};

template <class Fn>
class HookList {
 public:
  HookHandle add(Fn fn) {
    const uint64_t id = next_id_++;
    entries_->emplace_back(id, std::move(fn));
    std::weak_ptr<Entries> weak = entries_;
    return HookHandle([weak, id] {
      if (auto entries = weak.lock())
        std::erase_if(*entries, [id](const auto& entry) { return entry.first == id; });
    });
  }
  // A copy, so a running hook may add or remove hooks without invalidating the iteration.
  std::vector<Fn> snapshot() const {
    std::vector<Fn> out;
    out.reserve(entries_->size());
    for (const auto& entry : *entries_) out.push_back(entry.second);
    return out;
  }
  bool empty() const { return entries_->empty(); }

 private:
  using Entries = std::vector<std::pair<uint64_t, Fn>>;
  std::shared_ptr<Entries> entries_ = std::make_shared<Entries>();
  uint64_t next_id_ = 0;
};

}  // namespace acc::autograd
