// The names config files use for acc::Config's enums, and the spellings accepted besides them.
#include <algorithm>
#include <span>
#include <string_view>

#include "acc/config/config.h"
#include "acc/util/error.h"
#include "acc/util/strings.h"

namespace acc {
namespace {

template <class E>
struct Spelling {
  E value;
  std::string_view name;
};

// The first spelling of a value is the name to_string gives; later ones are accepted aliases.
constexpr Spelling<ShardingStrategy> kShardingStrategies[] = {
    {ShardingStrategy::FULL_SHARD, "FULL_SHARD"},
    {ShardingStrategy::SHARD_GRAD_OP, "SHARD_GRAD_OP"},
    {ShardingStrategy::NO_SHARD, "NO_SHARD"},
    {ShardingStrategy::HYBRID_SHARD, "HYBRID_SHARD"},
    {ShardingStrategy::HYBRID_SHARD_ZERO2, "HYBRID_SHARD_ZERO2"},
    {ShardingStrategy::AUTO, "AUTO"},
    // Hugging Face accelerate numbers them too (and older versions write only the number).
    {ShardingStrategy::FULL_SHARD, "1"},
    {ShardingStrategy::SHARD_GRAD_OP, "2"},
    {ShardingStrategy::NO_SHARD, "3"},
    {ShardingStrategy::HYBRID_SHARD, "4"},
    {ShardingStrategy::HYBRID_SHARD_ZERO2, "5"},
};
constexpr Spelling<DistributedType> kDistributedTypes[] = {
    {DistributedType::NO, "NO"},
    {DistributedType::FSDP, "FSDP"},
    {DistributedType::SPMD, "SPMD"},
    // accelerate's data-parallel CPU run: to acc a plain run on several ranks.
    {DistributedType::NO, "MULTI_CPU"},
};
constexpr Spelling<WrapPolicy> kWrapPolicies[] = {
    {WrapPolicy::TRANSFORMER_BASED_WRAP, "TRANSFORMER_BASED_WRAP"},
    {WrapPolicy::SIZE_BASED_WRAP, "SIZE_BASED_WRAP"},
    {WrapPolicy::NO_WRAP, "NO_WRAP"},
    {WrapPolicy::SIZE_BASED_WRAP, "SIZED_BASED_WRAP"},  // accelerate's own spelling
};
constexpr Spelling<BackwardPrefetch> kBackwardPrefetches[] = {
    {BackwardPrefetch::BACKWARD_PRE, "BACKWARD_PRE"},
    {BackwardPrefetch::BACKWARD_POST, "BACKWARD_POST"},
    {BackwardPrefetch::NO_PREFETCH, "NO_PREFETCH"},
};
constexpr Spelling<StateDictType> kStateDictTypes[] = {
    {StateDictType::SHARDED_STATE_DICT, "SHARDED_STATE_DICT"},
    {StateDictType::FULL_STATE_DICT, "FULL_STATE_DICT"},
};

template <class E>
std::string name_of(std::span<const Spelling<E>> spellings, E value) {
  auto it = std::ranges::find(spellings, value, &Spelling<E>::value);
  ACC_CHECK(it != spellings.end(), "no name for enum value ", static_cast<int>(value));
  return std::string(it->name);
}

template <class E>
E parse(std::span<const Spelling<E>> spellings, const std::string& value, const std::string& key) {
  const std::string upper = util::upper(value);
  auto it = std::ranges::find(spellings, std::string_view(upper), &Spelling<E>::name);
  if (it != spellings.end()) return it->value;
  std::string allowed;
  for (const auto& s : spellings) allowed += (allowed.empty() ? "" : ", ") + std::string(s.name);
  ACC_FAIL(key, ": bad value '", value, "' (allowed: ", allowed, ")");
}

}  // namespace

std::string to_string(ShardingStrategy s) { return name_of<ShardingStrategy>(kShardingStrategies, s); }
std::string to_string(DistributedType t) { return name_of<DistributedType>(kDistributedTypes, t); }
std::string to_string(WrapPolicy p) { return name_of<WrapPolicy>(kWrapPolicies, p); }
std::string to_string(BackwardPrefetch p) { return name_of<BackwardPrefetch>(kBackwardPrefetches, p); }
std::string to_string(StateDictType t) { return name_of<StateDictType>(kStateDictTypes, t); }

bool is_hybrid(ShardingStrategy s) {
  return s == ShardingStrategy::HYBRID_SHARD || s == ShardingStrategy::HYBRID_SHARD_ZERO2;
}
bool reshards_after_forward(ShardingStrategy s) {
  return s == ShardingStrategy::FULL_SHARD || s == ShardingStrategy::HYBRID_SHARD;
}

ShardingStrategy parse_sharding_strategy(const std::string& value, const std::string& key) {
  return parse<ShardingStrategy>(kShardingStrategies, value, key);
}
DistributedType parse_distributed_type(const std::string& value, const std::string& key) {
  return parse<DistributedType>(kDistributedTypes, value, key);
}
WrapPolicy parse_wrap_policy(const std::string& value, const std::string& key) {
  return parse<WrapPolicy>(kWrapPolicies, value, key);
}
BackwardPrefetch parse_backward_prefetch(const std::string& value, const std::string& key) {
  return parse<BackwardPrefetch>(kBackwardPrefetches, value, key);
}
StateDictType parse_state_dict_type(const std::string& value, const std::string& key) {
  return parse<StateDictType>(kStateDictTypes, value, key);
}

namespace {
template <class E>
std::vector<std::string> names(std::span<const Spelling<E>> spellings) {
  std::vector<std::string> out;
  for (const auto& s : spellings) out.emplace_back(s.name);
  return out;
}
}  // namespace

template <>
std::vector<std::string> spellings<ShardingStrategy>() { return names<ShardingStrategy>(kShardingStrategies); }
template <>
std::vector<std::string> spellings<WrapPolicy>() { return names<WrapPolicy>(kWrapPolicies); }
template <>
std::vector<std::string> spellings<BackwardPrefetch>() { return names<BackwardPrefetch>(kBackwardPrefetches); }
template <>
std::vector<std::string> spellings<StateDictType>() { return names<StateDictType>(kStateDictTypes); }

}  // namespace acc
