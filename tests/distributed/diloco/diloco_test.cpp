// The DiLoCo plugin of examples/diloco_plugin, built out of tree against the installed acc (the
// install test builds it; ACC_PLUGIN_PATH points at it), against NO_SHARD on the same global
// batches, at 2 and 4 ranks. These tests prove the strategy contract from outside: a plugin's
// own option section, its strategy chosen by name, its step through the optimizer's groups.
#include <gtest/gtest.h>

#include "acc/acc.h"
#include "acc/distributed/traffic.h"
#include "acc/estimate/model_shape.h"
#include "acc/memory/allocator.h"
#include "acc/plugin/registry.h"
#include "distributed/fsdp/fsdp_fixtures.h"
#include "distributed/local/error_matchers.h"

namespace acc::test {
namespace {

constexpr int64_t kBatch = 8;  // global: 4 or 2 samples per rank

Config diloco_config(int64_t inner_steps, double outer_lr, double momentum) {
  Config config;
  config.dist.strategy = "DILOCO";
  config.set("diloco_config.inner_steps", std::to_string(inner_steps));
  config.set("diloco_config.outer_lr", std::to_string(outer_lr));
  config.set("diloco_config.outer_momentum", std::to_string(momentum));
  return config;
}

struct TrainRun {
  std::vector<float> losses;  // the global batch's mean loss per step
  std::vector<std::pair<std::string, std::vector<float>>> params;
  uint64_t bytes = 0;  // what this rank's collectives moved during the steps
};

// `steps` optimizer steps of GPT-2 (the fixtures' small one) through acc::accelerate: plain SGD
// (linear in the gradient, so DiLoCo with one inner step is data parallelism) or AdamW.
// `at_end` sees the model while the optimizer still holds its state.
TrainRun train(const Config& config, int64_t steps, bool sgd,
               const std::function<void(const ShardedModel&)>& at_end = {}) {
  data::DataLoader global(make_dataset("gpt2", steps * kBatch), {.batch_size = kBatch, .prefetch = 0});
  auto [sharded, loader] = accelerate(make_model("gpt2"), global, config);
  std::unique_ptr<optim::Optimizer> opt;
  if (sgd)
    opt = std::make_unique<optim::SGD>(sharded->param_groups(0.0), optim::SGDOptions{.lr = 0.05});
  else
    opt = std::make_unique<optim::AdamW>(sharded->param_groups(0.1), optim::AdamWOptions{.lr = 1e-3});
  TrainRun run;
  dist::reset_traffic();
  for (const auto& batch : loader) {
    opt->zero_grad();
    Tensor loss = sharded->forward(batch).loss;
    loss.backward();
    opt->step();
    run.losses.push_back(loss.item());
  }
  run.bytes = dist::traffic().total_bytes();
  if (at_end) at_end(*sharded);
  Tensor mean = Tensor::from_vector(run.losses, {static_cast<int64_t>(run.losses.size())});
  world().all_reduce(mean, dist::ReduceOp::avg);
  run.losses = mean.to_vector();
  for (const auto& [name, value] : sharded->full_parameters()) run.params.emplace_back(name, value.to_vector());
  return run;
}

Config no_shard() { return strategy_config("NO_SHARD", "gpt2"); }

TEST(Diloco, OneInnerStepWithAPlainOuterStepIsDataParallelSgd) {
  const TrainRun ref = train(no_shard(), 4, /*sgd=*/true);
  const TrainRun got = train(diloco_config(1, 1.0, 0.0), 4, /*sgd=*/true);
  ASSERT_EQ(got.losses.size(), ref.losses.size());
  // The same sums in another order: NO_SHARD steps by the mean gradient, DiLoCo by the mean of
  // the ranks' steps, subtracted from the shared parameters and added back (f32 rounding only).
  for (size_t i = 0; i < ref.losses.size(); ++i) EXPECT_NEAR(got.losses[i], ref.losses[i], 1e-5 * ref.losses[i]) << i;
  ASSERT_EQ(got.params.size(), ref.params.size());
  for (size_t p = 0; p < ref.params.size(); ++p) {
    ASSERT_EQ(got.params[p].first, ref.params[p].first);
    for (size_t i = 0; i < ref.params[p].second.size(); ++i) {
      const float want = ref.params[p].second[i];
      ASSERT_NEAR(got.params[p].second[i], want, 5e-6 + 1e-5 * std::abs(want)) << ref.params[p].first << "[" << i << "]";
    }
  }
}

TEST(Diloco, EightInnerStepsSendAnEighthOfNoShardsBytes) {
  ASSERT_GT(world().size(), 1) << "runs at 2 and 4 ranks";
  const TrainRun ref = train(no_shard(), 16, /*sgd=*/false);
  const TrainRun got = train(diloco_config(8, 0.7, 0.9), 16, /*sgd=*/false);
  ASSERT_GT(ref.bytes, 0u);
  const double ratio = static_cast<double>(got.bytes) / static_cast<double>(ref.bytes);
  if (world().rank() == 0)
    std::printf("DiLoCo H=8: %llu bytes, NO_SHARD: %llu bytes per rank over 16 steps (ratio %.4f)\n",
                static_cast<unsigned long long>(got.bytes), static_cast<unsigned long long>(ref.bytes), ratio);
  EXPECT_NEAR(ratio, 1.0 / 8, 0.02 / 8);
  // How well DiLoCo trains is bench/diloco/run.sh's to say (200 steps on Brown): these tokens are
  // random, and 16 steps do not move their loss beyond a batch's noise (NO_SHARD's 16th batch
  // loss is above its first).
}

TEST(Diloco, TheReplicasAgreeAfterAnOuterStepOnly) {
  ASSERT_GT(world().size(), 1) << "runs at 2 and 4 ranks";
  for (int64_t steps : {3, 4}) {  // mid-way through the inner steps, then right after the outer one
    const TrainRun run = train(diloco_config(4, 0.7, 0.9), steps, /*sgd=*/false);
    Tensor first = Tensor::from_vector(run.params.front().second, {static_cast<int64_t>(run.params.front().second.size())});
    Tensor mine = first.clone();
    world().broadcast(first, 0);
    const bool same = first.to_vector() == mine.to_vector();
    Tensor differs = Tensor::full({1}, same ? 0.0 : 1.0);
    world().all_reduce(differs);
    EXPECT_EQ(differs.item() > 0, steps == 3) << "after " << steps << " steps";
  }
}

// What the plugin tells `accelerate estimate-memory` is what the allocator holds after a step.
TEST(Diloco, EstimateMatchesTheAllocator) {
  const Config config = diloco_config(8, 0.7, 0.9);
  train(config, 2, /*sgd=*/false, [&](const ShardedModel& sharded) {
    const estimate::Workload w{.world = world().size(), .batch = kBatch, .seq = 16};
    const auto rows = plugin::Registry::global().make_strategy("DILOCO")->estimate_memory(
        estimate::ModelShape::of(sharded.module()), w, config);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].plan, "DILOCO (inner_steps 8)");
    const memory::Report r = memory::report();
    EXPECT_EQ(r[memory::Category::parameters].current, rows[0].memory.parameters);
    EXPECT_EQ(r[memory::Category::gradients].current, rows[0].memory.gradients);
    EXPECT_EQ(r[memory::Category::optimizer_state].current, rows[0].memory.optimizer_state);
  });
}

TEST(Diloco, BadOptionsNameTheKey) {
  Config config;
  EXPECT_ACC_ERROR(config.set("diloco_config.inner_steps", "0"), {"diloco_config.inner_steps", "'0'", ">= 1"});
  EXPECT_ACC_ERROR(config.set("diloco_config.outer_momentum", "many"), {"diloco_config.outer_momentum", "a number"});
  EXPECT_ACC_ERROR(Config::from_yaml("strategy: DILOCO\ndiloco_config:\n  inner_step: 8\n", "f.yaml"),
                   {"f.yaml", "unknown key 'diloco_config.inner_step'", "inner_steps, outer_lr"});
  config.set("outer_lr", "0");  // the short name finds the plugin's section
  EXPECT_ACC_ERROR(config.validate(), {"diloco_config.outer_lr", "must be > 0"});
}

TEST(Diloco, SectionRoundTripsThroughYaml) {
  const Config config = diloco_config(16, 0.5, 0.0);
  const Config reread = Config::from_yaml(config.to_yaml());
  EXPECT_EQ(reread, config);
  EXPECT_EQ(reread.section("diloco_config").integer("inner_steps"), 16);
  EXPECT_EQ(reread.section("diloco_config").number("outer_lr"), 0.5);
  EXPECT_TRUE(reread.section("diloco_config").boolean("outer_nesterov"));  // the default
}

}  // namespace
}  // namespace acc::test
