// summon_full_params(): the wrapped model's parameters whole on every rank for evaluation and
// inspection, and changes written back to the shards only when asked.
#include <gtest/gtest.h>

#include "acc/autograd/grad_mode.h"
#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

std::shared_ptr<ShardedModel> sharded_gpt2(bool bf16 = false) {
  const Config config = strategy_config("FULL_SHARD", "gpt2", bf16);
  data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 8, .prefetch = 0});
  return accelerate(make_model("gpt2"), loader, config).model;
}

TEST(SummonFullParams, TheWrappedModelIsWholeAndEvaluatesAsTheShardedOne) {
  auto sharded = sharded_gpt2();
  const auto full = sharded->full_parameters();
  data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 8, .prefetch = 0});
  const data::Batch batch = *loader.begin();
  autograd::NoGradGuard no_grad;
  const float sharded_loss = sharded->forward(batch).loss.item();
  {
    auto scope = sharded->summon_full_params();
    const auto params = sharded->module().named_parameters();
    ASSERT_EQ(params.size(), full.size());
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_EQ(params[i].second.to_vector(), full[i].second.to_vector()) << full[i].first;
    // The module alone, on this rank only: no unit is released, nothing is gathered again.
    EXPECT_EQ(sharded->module().forward(batch).loss.item(), sharded_loss);
    EXPECT_EQ(sharded->module().forward(batch).loss.item(), sharded_loss);
  }
}

// Summoned parameters are for evaluation: a backward there would reduce nothing, as PyTorch's
// FSDP refuses it too.
TEST(SummonFullParams, ABackwardInsideIsAnError) {
  auto sharded = sharded_gpt2();
  data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 8, .prefetch = 0});
  const data::Batch batch = *loader.begin();
  {
    auto scope = sharded->summon_full_params();
    EXPECT_NE(error_of([&] { sharded->forward(batch).loss.backward(); }).find("a backward inside summon_full_params()"),
              std::string::npos);
  }
  // The model trains as before once the scope is left.
  sharded->forward(batch).loss.backward();
}

TEST(SummonFullParams, WritesBackOnlyWhenAsked) {
  auto sharded = sharded_gpt2();
  const std::string name = "transformer.h.1.mlp.c_fc.weight";
  {
    auto scope = sharded->summon_full_params();
    Tensor(sharded->module().parameter(name)).fill_(2.0f);
  }
  // Without writeback a sharded unit's change is dropped (on one rank the gathered buffer is
  // the master itself, as PyTorch's summon leaves it undefined).
  for (const auto& [n, t] : sharded->full_parameters())
    if (n == name && world().size() > 1) {
      EXPECT_NE(t.to_vector()[0], 2.0f) << "discarded without writeback";
    }
  {
    auto scope = sharded->summon_full_params(/*writeback=*/true);
    Tensor(sharded->module().parameter(name)).fill_(2.0f);
    // A forward through the sharded model inside the scope uses the whole parameters as they
    // are now, and leaves them so.
    data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 8, .prefetch = 0});
    autograd::NoGradGuard no_grad;
    sharded->forward(*loader.for_rank(world().rank(), world().size()).begin());
  }
  for (const auto& [n, t] : sharded->full_parameters())
    if (n == name) {
      EXPECT_EQ(t.to_vector(), std::vector<float>(t.numel(), 2.0f));
    }
}

TEST(SummonFullParams, WritebackNeedsF32) {
  auto sharded = sharded_gpt2(/*bf16=*/true);
  EXPECT_THROW({ auto scope = sharded->summon_full_params(true); }, Error);
  auto scope = sharded->summon_full_params();  // reading bf16 copies is fine
}

}  // namespace
}  // namespace acc::test
