// The memory estimator against the allocator: activation peaks of GPT-2 and Llama blocks of
// several widths (one process), and every category of a GPT-2 tiny training step per rank at
// 1, 2 and 4 ranks for the strategies, f32 and bf16.
#include <gtest/gtest.h>

#include <filesystem>

#include "acc/distributed/single_process_group.h"
#include "acc/accelerate/accelerate.h"
#include "acc/estimate/memory_estimate.h"
#include "acc/memory/allocator.h"
#include "acc/models/gpt2.h"
#include "acc/models/llama.h"
#include "acc/plugin/registry.h"
#include "fsdp/fsdp_estimate.h"
#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

// --- activations, one process --------------------------------------------------------------

struct Shape {
  const char* family;
  int64_t hidden, intermediate;
};

std::shared_ptr<models::Model> block_model(const Shape& s, int64_t vocab, int64_t seq) {
  if (std::string(s.family) == "gpt2") {
    auto c = models::GPT2Config::tiny();
    c.n_embd = s.hidden;
    c.vocab_size = vocab;
    c.n_positions = seq;
    return std::make_shared<models::GPT2>(c, 0);
  }
  auto c = models::LlamaConfig::tiny();
  c.hidden_size = s.hidden;
  c.intermediate_size = s.intermediate;
  c.vocab_size = vocab;
  c.max_position_embeddings = seq;
  return std::make_shared<models::Llama>(c, 0);
}

class ActivationEstimate : public ::testing::TestWithParam<std::tuple<Shape, bool, bool>> {};

TEST_P(ActivationEstimate, MatchesTheMeasuredPeak) {
  if (world().size() > 1) GTEST_SKIP() << "one process measures it";
  const auto& [shape, bf16, checkpointing] = GetParam();
  constexpr int64_t kBatch = 4, kSeq = 64, kVocabSize = 1024;
  Config config = strategy_config("NO_SHARD", shape.family, bf16);
  config.dist.distributed_type = DistributedType::NO;
  config.dist.fsdp.activation_checkpointing = checkpointing;
  auto strategy = plugin::Registry::global().make_strategy(config.strategy_name());
  strategy->setup(std::make_shared<dist::SingleProcessGroup>(), dist::Topology{}, config);
  auto model = block_model(shape, kVocabSize, kSeq);
  const auto model_shape = estimate::ModelShape::of(*model);
  data::DataLoader loader(make_token_dataset(2 * kBatch, kVocabSize, kSeq), {.batch_size = kBatch, .prefetch = 0});
  const MemoryPeaks p = measure_step([&] { return strategy->wrap(model); }, loader, 2);
  const int64_t estimated = estimate::activation_bytes(model_shape, kBatch, kSeq, bf16, checkpointing);
  expect_within(p.activations, estimated, 0.10, "activations");
}

std::string activation_case(const ::testing::TestParamInfo<std::tuple<Shape, bool, bool>>& info) {
  const auto& [shape, bf16, checkpointing] = info.param;
  return std::string(shape.family) + "_" + std::to_string(shape.hidden) + "_" +
         std::to_string(shape.intermediate) + (bf16 ? "_bf16" : "_f32") + (checkpointing ? "_ckpt" : "");
}

INSTANTIATE_TEST_SUITE_P(Estimate, ActivationEstimate,
                         ::testing::Combine(::testing::Values(Shape{"gpt2", 128, 512}, Shape{"gpt2", 256, 1024},
                                                              Shape{"llama", 128, 352}, Shape{"llama", 256, 512}),
                                            ::testing::Bool(), ::testing::Bool()),
                         activation_case);

// --- every category, GPT-2 tiny at the world's size --------------------------------------------

class StepEstimate : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(StepEstimate, MatchesTheAllocatorPerRank) {
  const auto& [name, bf16] = GetParam();
  constexpr int64_t kSeqLen = 64, kGlobalBatch = 8;
  const auto c = models::GPT2Config::tiny();
  Config config = strategy_config(name, "gpt2", bf16);
  data::DataLoader loader(make_token_dataset(2 * kGlobalBatch, c.vocab_size, kSeqLen),
                          {.batch_size = kGlobalBatch, .prefetch = 0});
  const MemoryPeaks p = measure_step(
      [&] { return accelerate(std::make_shared<models::GPT2>(c, 0), loader, config).model; },
      loader.for_rank(world().rank(), world().size()), 2);

  const estimate::Workload w{.world = world().size(), .ranks_per_node = topology().local_size,
                             .batch = kGlobalBatch, .seq = kSeqLen, .bf16 = bf16};
  const auto e = fsdp::estimate(estimate::ModelShape::of(c), {parse_sharding_strategy(name, "test"), false}, w);
  expect_within(p.parameters, e.parameters + e.gathered, 0.10, "parameters and gathered units");
  expect_within(p.gradients, e.gradients, 0.10, "gradients");
  expect_within(p.optimizer, e.optimizer_state, 0.10, "optimizer state");
  expect_within(p.activations, e.activations, 0.10, "activations");
  expect_within(p.total, e.total(), 0.10, "total");
}

std::string step_case(const ::testing::TestParamInfo<std::tuple<std::string, bool>>& info) {
  return std::get<0>(info.param) + (std::get<1>(info.param) ? "_bf16" : "_f32");
}

INSTANTIATE_TEST_SUITE_P(Estimate, StepEstimate,
                         ::testing::Combine(::testing::Values("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"),
                                            ::testing::Bool()),
                         step_case);

// --- AUTO -----------------------------------------------------------------------------------

TEST(EstimateAuto, TakesTheLeastCommunicatingPlanThatFits) {
  const auto shape = estimate::ModelShape::from_name("gpt2-medium");
  const estimate::Workload w{.world = 4, .ranks_per_node = 4, .batch = 16, .seq = 512, .bf16 = true};
  auto total = [&](ShardingStrategy s, bool ckpt) { return fsdp::estimate(shape, {s, ckpt}, w).total(); };
  // Each plan in the order tried needs less than the one before.
  const int64_t no_shard = total(ShardingStrategy::NO_SHARD, false),
                grad_op = total(ShardingStrategy::SHARD_GRAD_OP, false),
                full = total(ShardingStrategy::FULL_SHARD, false),
                full_ckpt = total(ShardingStrategy::FULL_SHARD, true);
  ASSERT_GT(no_shard, grad_op);
  ASSERT_GT(grad_op, full);
  ASSERT_GT(full, full_ckpt);
  // AUTO asks every registered strategy (the FSDP plugin's five settings among them).
  Config wrapped;  // each block its own unit, as the estimates above assume
  wrapped.set("fsdp_config.fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP");
  const auto rows = strategy_estimates(shape, w, wrapped);
  auto chosen = [&](int64_t limit) { return choose_auto(rows, limit); };
  EXPECT_EQ(chosen(no_shard).row.plan, "NO_SHARD");
  EXPECT_EQ(chosen(no_shard - 1).row.plan, "SHARD_GRAD_OP");
  EXPECT_EQ(chosen(grad_op - 1).row.plan, "FULL_SHARD");
  const auto last = chosen(full - 1);
  EXPECT_TRUE(last.fits && last.row.plan == "FULL_SHARD + activation checkpointing") << last.reason;
  const auto none = chosen(full_ckpt - 1);
  EXPECT_FALSE(none.fits);
  EXPECT_EQ(none.row.plan, "FULL_SHARD + activation checkpointing");
  EXPECT_NE(none.reason.find("NO_SHARD needs"), std::string::npos) << none.reason;
  // The hybrids come between NO_SHARD and SHARD_GRAD_OP only when there are several nodes.
  const estimate::Workload two_nodes{.world = 4, .ranks_per_node = 2, .batch = 16, .seq = 512};
  const auto over_nodes = strategy_estimates(shape, two_nodes, wrapped);
  auto place = [&](const std::string& plan) {
    return std::ranges::find_if(over_nodes, [&](const StrategyEstimate& r) { return r.plan == plan; }) - over_nodes.begin();
  };
  EXPECT_LT(place("NO_SHARD"), place("HYBRID_SHARD_ZERO2"));
  EXPECT_LT(place("HYBRID_SHARD_ZERO2"), place("HYBRID_SHARD"));
  EXPECT_LT(place("HYBRID_SHARD"), place("SHARD_GRAD_OP"));
  EXPECT_EQ(rows[1].plan, "SHARD_GRAD_OP");
}

// The FSDP row with files in the offload directory (other plugins' rows may follow it).
const StrategyEstimate& files_row(const std::vector<StrategyEstimate>& rows) {
  const auto it = std::ranges::find_if(rows, [](const StrategyEstimate& r) { return r.memory.on_disk > 0 || r.plan.find("files in") != std::string::npos; });
  if (it == rows.end()) throw std::runtime_error("no row with files in the offload directory");
  return *it;
}

// Under AUTO, fsdp_offload_dir names where AUTO may offload: every other row keeps the state in
// memory (and choosing it clears the key); FULL_SHARD with checkpointing and files there comes
// last, with the f32 masters, their gradients and both moments on disk, and only if the
// directory has the room.
// Without AUTO the key is the config's choice and every row offloads.
TEST(EstimateAuto, OffloadsToFilesLastAndOnlyWhereThereIsRoom) {
  const auto shape = estimate::ModelShape::from_name("gpt2-xl");
  const estimate::Workload w{.world = 4, .ranks_per_node = 4, .batch = 4, .seq = 256, .bf16 = true};
  const std::string dir = std::filesystem::temp_directory_path().string();
  Config config = Config::from_yaml("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: AUTO\n"
                                    "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n");
  config.dist.fsdp.offload_dir = dir;
  const auto rows = strategy_estimates(shape, w, config);
  const StrategyEstimate& files = files_row(rows);
  const std::string files_plan = "FULL_SHARD + activation checkpointing + files in " + dir;
  ASSERT_EQ(files.plan, files_plan);
  const int64_t held = shape.parameters / 4;
  EXPECT_NEAR(static_cast<double>(files.memory.on_disk), 16.0 * static_cast<double>(held), 16.0);
  EXPECT_EQ(files.memory.optimizer_state, 0);
  EXPECT_EQ(files.memory.gradients, 0);
  EXPECT_NEAR(static_cast<double>(files.memory.parameters), 2.0 * static_cast<double>(held), 2.0);  // bf16 shard
  const StrategyEstimate* checkpointed = nullptr;
  for (const auto& row : rows) {
    if (&row != &files) {
      EXPECT_EQ(row.memory.on_disk, 0) << row.plan;
    }
    if (row.plan == "FULL_SHARD + activation checkpointing") checkpointed = &row;
  }
  ASSERT_TRUE(checkpointed);
  ASSERT_LT(files.memory.total(), checkpointed->memory.total());

  // Not AUTO: the config offloads, so every row does.
  Config fixed = config;
  fixed.dist.fsdp.sharding_strategy = ShardingStrategy::FULL_SHARD;
  for (const auto& row : strategy_estimates(shape, w, fixed))
    if (row.plan.starts_with("NO_SHARD") || row.plan.starts_with("FULL_SHARD")) {
      EXPECT_GT(row.memory.on_disk, 0) << row.plan;
    }

  // Between the two: only files fit; choosing them keeps the directory, others clear it.
  const auto choice = choose_auto(rows, checkpointed->memory.total() - 1);
  if (std::filesystem::space(dir).available < static_cast<uintmax_t>(4 * files.memory.on_disk))
    GTEST_SKIP() << dir << " has no room for GPT-2 XL's files";  // the next test covers that case
  ASSERT_TRUE(choice.fits) << choice.reason;
  EXPECT_EQ(choice.row.plan, files_plan);
  const Config offloading = apply_auto_choice(config, choice.row);
  EXPECT_EQ(offloading.dist.fsdp.offload_dir, dir);
  EXPECT_TRUE(offloading.dist.fsdp.activation_checkpointing);
  EXPECT_EQ(offloading.dist.fsdp.sharding_strategy, ShardingStrategy::FULL_SHARD);
  EXPECT_EQ(apply_auto_choice(config, choose_auto(rows, int64_t{1} << 50).row).dist.fsdp.offload_dir, "");

}

TEST(EstimateAuto, DoesNotOffloadToADirectoryWithoutRoom) {
  estimate::ModelShape huge = estimate::ModelShape::from_name("gpt2-xl");
  huge.parameters = int64_t{1} << 50;  // a petabyte of state per rank: no disk holds it
  const estimate::Workload w{.world = 1, .ranks_per_node = 1, .batch = 1, .seq = 16};
  Config config = Config::from_yaml("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: AUTO\n");
  config.dist.fsdp.offload_dir = std::filesystem::temp_directory_path().string();
  const auto rows = strategy_estimates(huge, w, config);
  const StrategyEstimate& files = files_row(rows);
  EXPECT_NE(files.plan.find("files in"), std::string::npos);
  EXPECT_NE(files.plan.find("free, has"), std::string::npos) << files.plan;
  EXPECT_FALSE(files.auto_order.has_value());
  EXPECT_NE(choose_auto(rows, 1).row.plan, files.plan);  // never AUTO's choice, even as the least
  config.dist.fsdp.offload_dir = "/no/such/directory";
  EXPECT_NE(files_row(strategy_estimates(huge, w, config)).plan.find("not usable"), std::string::npos);
}

TEST(EstimateAuto, AccelerateResolvesAutoAndTrains) {
  Config config = strategy_config("FULL_SHARD", "gpt2");
  config.dist.fsdp.sharding_strategy = ShardingStrategy::AUTO;
  auto loader = data::DataLoader(make_dataset("gpt2", 16), {.batch_size = 8, .prefetch = 0});
  const auto model = make_model("gpt2");
  // Plenty of memory: the least communication.
  config.dist.fsdp.memory_limit = int64_t{1} << 40;
  EXPECT_EQ(resolve_auto_strategy(config, *model, loader).dist.fsdp.sharding_strategy, ShardingStrategy::NO_SHARD);
  // A limit only a sharded plan meets (at one rank every plan is NO_SHARD's size).
  const estimate::Workload w{.world = world().size(), .ranks_per_node = topology().local_size,
                             .batch = 8, .seq = 16};
  const auto shape = estimate::ModelShape::of(*model);
  config.dist.fsdp.memory_limit = fsdp::estimate(shape, {ShardingStrategy::SHARD_GRAD_OP, false}, w).total();
  const Config resolved = resolve_auto_strategy(config, *model, loader);
  EXPECT_EQ(resolved.dist.fsdp.sharding_strategy,
            world().size() == 1 ? ShardingStrategy::NO_SHARD : ShardingStrategy::SHARD_GRAD_OP);
  // Through acc::accelerate the run is the chosen strategy's run.
  const RunResult automatic = run_accelerated("gpt2", config, 2, 8);
  const RunResult chosen = run_accelerated("gpt2", resolved, 2, 8);
  EXPECT_EQ(automatic.losses, chosen.losses);
  // make_strategy cannot resolve it: it does not know the model.
  EXPECT_NE(error_of([&] { make_strategy(config); }).find("AUTO is resolved by acc::accelerate()"), std::string::npos);
}

}  // namespace
}  // namespace acc::test
