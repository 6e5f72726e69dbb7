#include "acc/nn/deferred_init.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "acc/tensor/random.h"

namespace acc::nn {
namespace {

thread_local bool t_deferring = false;

struct Recipe {
  enum class Kind { constant, normal, uniform } kind = Kind::constant;
  uint64_t key = 0;
  float a = 0.f, b = 0.f;  // value; mean, std; low, high
};

// Recipes by storage. The weak pointer tells a live entry from one whose storage died and
// whose address was reused.
class Registry {
 public:
  void set(const Tensor& p, const Recipe& r) {
    std::lock_guard lock(mu_);
    if (entries_.size() >= prune_at_) {  // amortised: at most as many dead entries as live ones
      std::erase_if(entries_, [](const auto& e) { return e.second.storage.expired(); });
      prune_at_ = 2 * entries_.size() + 64;
    }
    entries_[p.storage().get()] = {p.storage(), r};
  }
  std::optional<Recipe> find(const Tensor& p) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(p.storage().get());
    if (it == entries_.end() || it->second.storage.lock() != p.storage()) return std::nullopt;
    return it->second.recipe;
  }
  void erase(const Tensor& p) {
    std::lock_guard lock(mu_);
    entries_.erase(p.storage().get());
  }

 private:
  struct Entry {
    std::weak_ptr<Storage> storage;
    Recipe recipe;
  };
  std::mutex mu_;
  std::unordered_map<const Storage*, Entry> entries_;
  size_t prune_at_ = 64;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: parameters may die after main
  return *r;
}

Recipe recipe_of(const Tensor& p) {
  const auto r = p.defined() && p.storage()->released() ? registry().find(p) : std::nullopt;
  ACC_CHECK(r, "deferred initialisation: ", p.defined() ? p.describe() : "an undefined tensor",
            " is not a deferred parameter");
  return *r;
}

void write(const Recipe& r, int64_t first, int64_t count, float* dst) {
  switch (r.kind) {
    case Recipe::Kind::constant: std::fill_n(dst, count, r.a); break;
    case Recipe::Kind::normal: random::fill_normal(dst, first, count, r.key, r.a, r.b); break;
    case Recipe::Kind::uniform: random::fill_uniform(dst, first, count, r.key, r.a, r.b); break;
  }
}

void record(const Tensor& p, const Recipe& r) {
  ACC_CHECK(p.storage_offset() == 0 && p.nbytes() == p.storage()->nbytes(),
            "deferred initialisation: ", p.describe(), " is a view; only whole parameters defer");
  registry().set(p, r);
}

}  // namespace

DeferredInit::DeferredInit(bool enabled) : previous_(t_deferring) { t_deferring = enabled; }
DeferredInit::~DeferredInit() { t_deferring = previous_; }

Tensor new_parameter(const Shape& shape) {
  memory::CategoryScope scope(memory::Category::parameters);
  if (!t_deferring) return Tensor::zeros(shape);
  Tensor p = Tensor::unallocated(shape);
  record(p, Recipe{});
  return p;
}

bool is_deferred(const Tensor& p) {
  return p.defined() && p.storage()->released() && registry().find(p).has_value();
}

bool has_deferred_parameters(const Module& root) {
  const auto params = root.named_parameters();
  return std::any_of(params.begin(), params.end(), [](const auto& np) { return is_deferred(np.second); });
}

void defer_constant(const Tensor& p, float value) {
  record(p, {Recipe::Kind::constant, 0, value, 0.f});
}

void defer_normal(const Tensor& p, uint64_t seed, const std::string& name, float mean, float std) {
  record(p, {Recipe::Kind::normal, random::stream_key(seed, name), mean, std});
}

void defer_uniform(const Tensor& p, uint64_t seed, const std::string& name, float low, float high) {
  record(p, {Recipe::Kind::uniform, random::stream_key(seed, name), low, high});
}

void fill_part(const Tensor& p, int64_t first, int64_t count, float* dst) {
  const Recipe r = recipe_of(p);
  ACC_CHECK(first >= 0 && count >= 0 && first + count <= p.numel(), "deferred initialisation: elements [",
            first, ", ", first + count, ") are outside ", p.describe());
  write(r, first, count, dst);
}

void materialize(Module& root) {
  for (auto& [_, p] : root.named_parameters()) {
    if (!is_deferred(p)) continue;  // a tied parameter is listed once, or was done already
    const Recipe r = recipe_of(p);
    p.storage()->reacquire();
    write(r, 0, p.numel(), p.data<float>());
    registry().erase(p);
  }
}

}  // namespace acc::nn
