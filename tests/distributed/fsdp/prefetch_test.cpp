// fsdp_forward_prefetch and fsdp_backward_prefetch: the all-gather of the next unit is issued
// before the current one computes. Only when collectives are issued changes, never what they
// compute, so training is the same bit for bit; memory grows by at most one unit.
#include <gtest/gtest.h>

#include "acc/memory/allocator.h"
#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

using Case = std::tuple<std::string, std::string, bool, bool>;  // strategy, model, bf16, checkpointing

Config prefetching(Config config, bool forward, BackwardPrefetch backward) {
  config.dist.fsdp.forward_prefetch = forward;
  config.dist.fsdp.backward_prefetch = backward;
  return config;
}

class Prefetch : public ::testing::TestWithParam<Case> {};

TEST_P(Prefetch, TrainsBitForBitAsWithout) {
  const auto& [strategy, kind, bf16, checkpointing] = GetParam();
  Config config = strategy_config(strategy, kind, bf16);
  config.dist.fsdp.activation_checkpointing = checkpointing;
  const RunResult plain = run_accelerated(kind, prefetching(config, false, BackwardPrefetch::NO_PREFETCH), 3, 8);
  for (const auto& [forward, backward] : {std::pair{true, BackwardPrefetch::BACKWARD_PRE},
                                          std::pair{true, BackwardPrefetch::BACKWARD_POST},
                                          std::pair{false, BackwardPrefetch::BACKWARD_PRE}}) {
    const RunResult prefetched = run_accelerated(kind, prefetching(config, forward, backward), 3, 8);
    EXPECT_EQ(prefetched.losses, plain.losses) << forward << " " << to_string(backward);
    EXPECT_EQ(prefetched.norms, plain.norms) << forward << " " << to_string(backward);
    EXPECT_EQ(prefetched.params, plain.params) << forward << " " << to_string(backward);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, Prefetch,
    ::testing::Values(Case{"FULL_SHARD", "gpt2", false, false}, Case{"FULL_SHARD", "gpt2", true, true},
                      Case{"SHARD_GRAD_OP", "gpt2", false, false}, Case{"HYBRID_SHARD", "llama", false, false},
                      Case{"FULL_SHARD", "llama", true, false}),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + std::get<1>(info.param) + (std::get<2>(info.param) ? "_bf16" : "_f32") +
             (std::get<3>(info.param) ? "_ckpt" : "");
    });

// The parameters' peak of a FULL_SHARD step (f32, GPT-2 tiny in GPT2Block units): with both
// prefetches at most one unit more than without, since a prefetch runs one unit ahead.
int64_t parameters_peak(bool prefetch) {
  Config config = prefetching(strategy_config("FULL_SHARD", "gpt2"), prefetch,
                              prefetch ? BackwardPrefetch::BACKWARD_PRE : BackwardPrefetch::NO_PREFETCH);
  data::DataLoader loader(make_dataset("gpt2", 16), {.batch_size = 8, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(make_model("gpt2"), loader, config);
  int64_t step = 0;
  for (auto& batch : rank_loader) {
    if (step++ == 1) memory::reset_peaks();  // the second step, when the order is known
    sharded->forward(batch).loss.backward();
  }
  return memory::report()[memory::Category::parameters].peak;
}

TEST(PrefetchMemory, HoldsAtMostOneMoreUnit) {
  const int64_t without = parameters_peak(false), with = parameters_peak(true);
  int64_t block = 0;  // one GPT2Block's gathered f32 bytes
  for (const auto& [name, p] : make_model("gpt2")->named_parameters())
    if (name.starts_with("transformer.h.0.")) block += p.numel() * 4;
  std::printf("parameters peak per rank: %.3f MB without prefetch, %.3f MB with (one block %.3f MB)\n",
              without / 1e6, with / 1e6, block / 1e6);
  EXPECT_LE(with, without + block + 4096);  // + the shard padding
  if (world().size() > 1) {
    EXPECT_GT(with, without);  // something was fetched ahead
  }
}

}  // namespace
}  // namespace acc::test
