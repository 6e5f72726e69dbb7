// The strategy contract's default summon_full_params(), driven by nothing but the pieces and
// placements a plugin reports: the flat_shards test plugin (plugins/flat_shards.cpp) keeps a
// range of every GPT-2 parameter's elements on each rank and an empty tensor in the model.
// Inside the scope every rank's model is whole and equal to the unwrapped model; after it, the
// model is empty again, and writeback brings the scope's changes into each rank's ranges. At
// 2 and 4 ranks.
#include <gtest/gtest.h>

#include <map>
#include <span>

#include "acc/autograd/grad_mode.h"
#include "acc/plugin/registry.h"
#include "acc/runtime/init.h"
#include "../fsdp/fsdp_fixtures.h"

namespace acc::test {
namespace {

std::shared_ptr<ShardedModel> flat_shards(std::shared_ptr<models::Model> model) {
  static plugin::Registry registry;  // a plugin is never unloaded: one registry for the tests
  if (registry.loaded().empty())
    registry.load_file(std::string(ACC_TEST_PLUGIN_DIR) + "/flat_shards/" + plugin::Registry::file_name("flat_shards"));
  auto strategy = registry.make_strategy("third_party_flat_shards");
  strategy->setup(world_ptr(), topology(), Config{});
  return strategy->wrap(std::move(model));
}

// Every parameter of `model` as held now: element counts and values by name.
std::map<std::string, std::vector<float>> values(const models::Model& model) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, p] : model.named_parameters()) out[name] = p.to_vector();
  return out;
}

TEST(DefaultSummon, GivesEveryRankTheWholeModelAndPutsItsOwnBack) {
  const auto reference = values(*make_model("gpt2"));
  auto sharded = flat_shards(make_model("gpt2"));
  const auto before = values(sharded->module());
  for (const auto& [name, v] : before) EXPECT_TRUE(v.empty()) << name << " should be held in shards only";
  {
    auto full = sharded->summon_full_params();
    EXPECT_EQ(values(sharded->module()), reference);
  }
  EXPECT_EQ(values(sharded->module()), before);
}

TEST(DefaultSummon, WritebackReachesEveryRanksShards) {
  auto reference = make_model("gpt2");
  auto sharded = flat_shards(make_model("gpt2"));
  {
    auto full = sharded->summon_full_params(/*writeback=*/true);
    autograd::NoGradGuard no_grad;
    for (auto& [name, p] : sharded->module().named_parameters())
      for (float& x : std::span(p.data<float>(), static_cast<size_t>(p.numel()))) x += 1.0f;
  }
  for (const auto& [name, whole] : sharded->full_parameters()) {
    std::vector<float> want = reference->parameter(name).to_vector();
    for (float& x : want) x += 1.0f;
    EXPECT_EQ(whole.to_vector(), want) << name;
  }
}

}  // namespace
}  // namespace acc::test
