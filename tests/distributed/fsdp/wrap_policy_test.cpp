// The ways to choose units besides the class list: by size (nested units), a C++ callable,
// and modules left unsharded. Each still trains as one process does.
#include <gtest/gtest.h>

#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

constexpr int64_t kSteps = 2, kGlobalBatch = 8;

Config full_shard() {
  Config config;
  config.dist.distributed_type = DistributedType::FSDP;
  config.dist.fsdp.sharding_strategy = ShardingStrategy::FULL_SHARD;
  return config;
}

// The same bounds as the equivalence test (see there).
void expect_like_one_process(const std::string& kind, const Config& config) {
  const RunResult sharded = run_accelerated(kind, config, kSteps, kGlobalBatch);
  const RunResult single = run_single_process(kind, kSteps, kGlobalBatch);
  EXPECT_TRUE(all_close(sharded.losses, single.losses, 1e-5f, 0.f));
  EXPECT_TRUE(all_close(sharded.norms, single.norms, 1e-5f, 0.f));
  ASSERT_EQ(sharded.params.size(), single.params.size());
  for (size_t i = 0; i < single.params.size(); ++i)
    EXPECT_TRUE(all_close(sharded.params[i].second, single.params[i].second, 1e-5f,
                          f32_param_atol(kind, "FULL_SHARD")))
        << single.params[i].first;
}

TEST(WrapPolicy, SizeBasedUnitsNest) {
  Config config = full_shard();
  config.dist.fsdp.auto_wrap_policy = WrapPolicy::SIZE_BASED_WRAP;
  config.dist.fsdp.auto_wrap_policy_set = true;
  config.dist.fsdp.min_num_params = 10000;  // each MLP and attention (and then blocks) of gpt2
  expect_like_one_process("gpt2", config);
}

// At 20000 each MLP (33088) is a unit but no attention (16640) or block (16896 left); the
// blocks' ModuleList and the `transformer` container would hold what is left over, but are
// never called themselves: no units.
TEST(WrapPolicy, SizeBasedPassesOverAModuleList) {
  Config config = full_shard();
  config.dist.fsdp.auto_wrap_policy = WrapPolicy::SIZE_BASED_WRAP;
  config.dist.fsdp.auto_wrap_policy_set = true;
  config.dist.fsdp.min_num_params = 20000;
  expect_like_one_process("gpt2", config);
}

TEST(WrapPolicy, CallableDecides) {
  Config config = full_shard();
  std::vector<std::string> asked;
  config.dist.fsdp.wrap_fn.fn = [&asked](const nn::Module& m, const std::string& name) {
    asked.push_back(name);
    return m.type_name() == "LlamaMLP" || name.ends_with("self_attn");
  };
  expect_like_one_process("llama", config);
  EXPECT_NE(std::find(asked.begin(), asked.end(), "model.layers.1.mlp"), asked.end());
}

TEST(WrapPolicy, IgnoredModulesStayWholeAndTrainAlike) {
  Config config = full_shard();
  config.dist.fsdp.wrap_layer_cls = block_classes("gpt2");
  config.dist.fsdp.ignored_modules = {"transformer.wpe", "transformer.h.1.mlp"};
  expect_like_one_process("gpt2", config);

  data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 8});
  auto [sharded, _] = accelerate(make_model("gpt2"), loader, config);
  const auto whole = make_model("gpt2");
  for (const auto& [name, piece] : sharded->named_parameters()) {
    if (!name.starts_with("transformer.wpe.") && !name.starts_with("transformer.h.1.mlp.")) continue;
    EXPECT_EQ(piece.numel(), whole->parameter(name).numel()) << name << " is not whole";
  }
}

TEST(WrapPolicy, UnknownIgnoredModuleIsAnError) {
  Config config = full_shard();
  config.dist.fsdp.ignored_modules = {"transformer.wpf"};
  data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 8});
  const std::string error = error_of([&] { accelerate(make_model("gpt2"), loader, config); });
  EXPECT_NE(error.find("fsdp_ignored_modules: 'transformer.wpf' is no module of GPT2LMHeadModel"),
            std::string::npos)
      << error;
}

// TRANSFORMER_BASED_WRAP naming no class wraps the blocks the model declares, as Hugging Face
// accelerate falls back to _no_split_modules; a model declaring none is a clear error.
// (visit_full_parameters gathers one unit per call, so its calls count the units.)
TEST(WrapPolicy, NoClassNamedWrapsTheModelsOwnBlocks) {
  Config config = full_shard();
  config.dist.fsdp.auto_wrap_policy = WrapPolicy::TRANSFORMER_BASED_WRAP;
  config.dist.fsdp.auto_wrap_policy_set = true;
  expect_like_one_process("gpt2", config);
  for (const std::string kind : {"gpt2", "llama"}) {
    auto units_of = [&](const Config& c) {
      data::DataLoader loader(make_dataset(kind, 8), {.batch_size = 8});
      auto [sharded, _] = accelerate(make_model(kind), loader, c);
      int units = 0;
      sharded->visit_full_parameters([&](const auto&) { ++units; });
      return units;
    };
    Config named = config, none = full_shard();
    named.dist.fsdp.wrap_layer_cls = block_classes(kind);
    const int by_default = units_of(config);
    EXPECT_EQ(by_default, units_of(named)) << kind;
    EXPECT_GT(by_default, units_of(none)) << kind << ": the blocks are units of their own";
  }
  data::DataLoader images(make_dataset("mlp", 8), {.batch_size = 8});
  const std::string error =
      error_of([&] { accelerate(make_model("mlp"), images, config); });
  EXPECT_NE(error.find("TRANSFORMER_BASED_WRAP names no class and MLPClassifier declares no blocks"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace acc::test
