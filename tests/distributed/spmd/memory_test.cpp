// Per-rank parameter memory is the sum of the specs' shard sizes: each parameter's elements
// divided by the sizes of the mesh axes its spec uses, plus the engine's padding (at most 16
// elements per fsdp rank and unit, for 64-byte aligned shards).
#include <gtest/gtest.h>

#include "acc/memory/allocator.h"
#include "acc/spmd/sharding_rules.h"
#include "spmd_fixtures.h"

namespace acc::test {
namespace {

int64_t spec_elements(const std::string& kind, const std::vector<int>& mesh, const std::string& rules) {
  const std::vector<std::string> axes{"fsdp", "model"};
  std::vector<std::pair<std::string, Shape>> params;
  for (const auto& [name, p] : make_model(kind)->named_parameters()) params.emplace_back(name, p.shape());
  const auto resolved = rules.empty()
      ? spmd::ShardingRules::parse("{}", "default").resolve(params, {}, axes, "fsdp")
      : spmd::ShardingRules::from_file(rules_path(rules)).resolve(params, {}, axes);
  int64_t total = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    int64_t elements = 1;
    for (int64_t d : params[i].second) elements *= d;
    for (const auto& axis : resolved.parameters[i].second.axes()) elements /= mesh[axis == "fsdp" ? 0 : 1];
    total += elements;
  }
  return total;
}

class SpmdMemory : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(SpmdMemory, ParametersPerRankAreTheSpecsShardSizes) {
  const auto& [kind, suffix] = GetParam();
  const std::string rules = suffix.empty() ? "" : kind + suffix;
  const std::vector<int> mesh = rules.empty() ? std::vector<int>{world().size(), 1} : fsdp_tp_mesh();
  const int64_t before = memory::report()[memory::Category::parameters].current;
  data::DataLoader loader(make_dataset(kind, 8), {.batch_size = 4, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(make_model(kind), loader, spmd_config(kind, mesh, rules));
  const int64_t held = memory::report()[memory::Category::parameters].current - before;
  const int64_t expected = 4 * spec_elements(kind, mesh, rules);
  const int64_t units = 4;  // the 2 blocks, the root and the parameters whole over fsdp
  EXPECT_GE(held, expected);
  EXPECT_LE(held, expected + 4 * 16 * units) << "expected " << expected << " bytes from the specs";
}

INSTANTIATE_TEST_SUITE_P(Spmd, SpmdMemory,
                         ::testing::Combine(::testing::Values("gpt2", "llama"),
                                            ::testing::Values("", "-fsdp-tp.yaml", "-fsdp-tp-hidden.yaml")),
                         [](const auto& info) {
                           const std::string& rules = std::get<1>(info.param);
                           return std::get<0>(info.param) + (rules.empty()                 ? "_default"
                                                             : rules == "-fsdp-tp.yaml" ? "_fsdp_tp"
                                                                                        : "_fsdp_tp_hidden");
                         });

}  // namespace
}  // namespace acc::test
