// fsdp_cpu_ram_efficient_loading: a model made by acc::make_model holds no parameter memory;
// the FSDP units make each rank's shard straight from the recorded initialisation. The shards
// equal a full initialisation's, so training is that of the plain model bit for bit, and no
// rank's parameters ever exceed its shards.
#include <gtest/gtest.h>

#include "acc/memory/allocator.h"
#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

Config deferring(Config config) {
  config.dist.fsdp.cpu_ram_efficient_loading = true;
  config.dist.fsdp.sync_module_states = true;  // as accelerate's guide pairs them: no effect here
  return config;
}

class DeferredInit : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(DeferredInit, TrainsBitForBitAsAFullInit) {
  const auto& [strategy, kind] = GetParam();
  const Config config = strategy_config(strategy, kind);
  const RunResult plain = run_accelerated(kind, config, 2, 8);
  const Config deferred = deferring(config);
  std::shared_ptr<models::Model> model;
  {
    nn::DeferredInit scope(deferred.dist.fsdp.cpu_ram_efficient_loading);
    model = make_model(kind);
  }
  ASSERT_TRUE(nn::has_deferred_parameters(*model));
  data::DataLoader all(make_dataset(kind, 16), {.batch_size = 8, .prefetch = 0});
  auto [sharded, loader] = accelerate(model, all, deferred);
  optim::AdamW opt(sharded->param_groups(kWeightDecay), kAdam);
  std::vector<float> losses;
  for (auto& batch : loader) {
    opt.zero_grad();
    Tensor loss = sharded->forward(batch).loss;
    loss.backward();
    sharded->clip_grad_norm(kMaxNorm);
    opt.step();
    Tensor mean = Tensor::from_vector({loss.item() / static_cast<float>(world().size())}, {1});
    world().all_reduce(mean);
    losses.push_back(mean.item());
  }
  EXPECT_EQ(losses, plain.losses);
  const auto params = sharded->full_parameters();
  ASSERT_EQ(params.size(), plain.params.size());
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(params[i].second.to_vector(), plain.params[i].second) << params[i].first;
}

INSTANTIATE_TEST_SUITE_P(Strategies, DeferredInit,
                         ::testing::Values(std::tuple{"FULL_SHARD", "gpt2"}, std::tuple{"HYBRID_SHARD", "llama"},
                                           std::tuple{"NO_SHARD", "mlp"}),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

// GPT-2 small (124M) in GPT2Block units: the parameters' peak while making and wrapping the
// model is this rank's shards (each unit's elements over the ranks, plus at most 16 of padding
// per unit, and a row of 768 for the token embedding split by rows), with no unit gathered;
// and every shard equals the same slice of a full init.
TEST(DeferredInit, Gpt2SmallHoldsOnlyItsShardsAndEqualsAFullInit) {
  const int n = world().size();
  // At one rank the shard is the whole model: a peak of one copy and the equality with a full
  // init are what 2 and 4 ranks check more sharply (and the Strategies cases, at every size).
  if (n == 1) GTEST_SKIP() << "one rank's shard is the whole model; checked at 2 and 4 ranks";
  const Config config = deferring(strategy_config("FULL_SHARD", "gpt2"));
  const int64_t before = memory::report()[memory::Category::parameters].current;
  memory::reset_peaks();
  auto model = acc::make_model<models::GPT2>(config, models::GPT2Config::small(), 7);
  int64_t numel = 0;
  for (const auto& [_, p] : model->named_parameters()) numel += p.numel();
  data::DataLoader all(make_token_dataset(8, 50257, 16), {.batch_size = 8, .prefetch = 0});
  auto [sharded, loader] = accelerate(model, all, config);
  model.reset();
  const int64_t units = 12 + 1;
  const int64_t peak = memory::report()[memory::Category::parameters].peak - before;
  std::printf("[rank %d] parameter peak %.1f MB for %.1f MB of parameters over %d ranks\n", world().rank(),
              peak / 1e6, 4.0 * numel / 1e6, n);
  EXPECT_LE(peak, 4 * ((numel + n - 1) / n + 16 * units + 768));

  // Compared in place: copies of GPT-2 small's 500 MB into vectors took ~2 s a rank here.
  std::map<std::string, Tensor> reference;
  for (const auto& [name, p] : models::GPT2(models::GPT2Config::small(), 7).named_parameters()) reference[name] = p;
  for (const auto& piece : sharded->parameter_pieces()) {
    const Tensor& whole = reference.at(piece.name);
    const float* mine = piece.master.data<float>();
    ASSERT_LE(piece.begin + piece.master.numel(), whole.numel());
    EXPECT_TRUE(std::equal(mine, mine + piece.master.numel(), whole.data<float>() + piece.begin)) << piece.name;
  }
}

}  // namespace
}  // namespace acc::test
