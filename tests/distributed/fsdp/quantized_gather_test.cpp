// fsdp_quantize_weights: int8 (ZeRO++'s qwZ): training gathers that cross nodes send each
// shard block-quantized to int8, so the forward computes with weights within half a block's
// scale of the masters, the gathers move about a quarter of f32's bytes, training stays close to
// exact gathers, and summon_full_params still gives the exact parameters. At 4 ranks the suite
// runs as 2 simulated nodes of 2 (ACC_RANKS_PER_NODE=2); at 2 ranks everything is one node,
// where the option changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "acc/distributed/traffic.h"
#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

bool crosses_nodes() { return topology().num_nodes > 1; }

constexpr const char* kBlock = "transformer.h.0";
constexpr const char* kWeight = "transformer.h.0.attn.c_attn.weight";

Config quantized_config(bool quantized) {
  Config config = strategy_config("FULL_SHARD", "gpt2");
  config.dist.fsdp.quantize_weights = quantized;
  return config;
}

// What the forward sees of kWeight on this rank, inside the block's call (gathered).
std::vector<float> weight_seen_in_forward(ShardedModel& sharded, const data::Batch& batch) {
  std::vector<float> seen;
  nn::Module& attn = sharded.module().submodule(std::string(kBlock) + ".attn");
  auto hook = attn.add_call_wrapper([&](nn::Module&, const Tensor& x, const nn::Module::Inner& inner) {
    seen = sharded.module().parameter(kWeight).to(DType::f32).to_vector();
    return inner(x);
  });
  sharded.forward(batch).loss.backward();
  hook.remove();
  return seen;
}

TEST(QuantizedGather, TheForwardSeesInt8WeightsWithinHalfABlockScale) {
  auto model = make_model("gpt2");
  const std::vector<float> exact = model->parameter(kWeight).to_vector();
  data::DataLoader all(make_dataset("gpt2", 8), {.batch_size = 8, .prefetch = 0});
  auto [sharded, loader] = accelerate(model, all, quantized_config(true));
  const std::vector<float> seen = weight_seen_in_forward(*sharded, *loader.begin());
  ASSERT_EQ(seen.size(), exact.size());
  if (!crosses_nodes()) {  // nothing is gathered across nodes, so nothing is quantized
    EXPECT_EQ(seen, exact);
    return;
  }
  // Each element within half its block's scale (max |x| / 127); blocks never span two
  // parameters, so the tensor's largest magnitude bounds every block's.
  float largest = 0, worst = 0;
  size_t differ = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    largest = std::max(largest, std::fabs(exact[i]));
    worst = std::max(worst, std::fabs(seen[i] - exact[i]));
    differ += seen[i] != exact[i];
  }
  EXPECT_LE(worst, largest / 254 * 1.001f);
  EXPECT_GT(differ, exact.size() / 2) << "the forward saw the exact weights: nothing was quantized";
}

TEST(QuantizedGather, SummonFullParamsIsExact) {
  auto model = make_model("gpt2");
  const std::vector<float> exact = model->parameter(kWeight).to_vector();
  data::DataLoader all(make_dataset("gpt2", 8), {.batch_size = 8, .prefetch = 0});
  auto [sharded, loader] = accelerate(model, all, quantized_config(true));
  sharded->forward(*loader.begin()).loss.backward();  // no step: the masters are unchanged
  auto whole = sharded->summon_full_params();
  EXPECT_EQ(sharded->module().parameter(kWeight).to_vector(), exact);
}

// The gathers' bytes, int8 against f32: (shard + 4 ⌈shard / 256⌉) / (4 shard) ≈ 0.254.
TEST(QuantizedGather, GathersMoveAQuarterOfF32Bytes) {
  if (!crosses_nodes()) GTEST_SKIP() << "one node: nothing crosses nodes";
  uint64_t bytes[2] = {0, 0};
  for (const bool quantized : {false, true}) {
    Config config = quantized_config(quantized);
    config.dist.fsdp.vocab_parallel = false;  // its ops all-gather activations too
    data::DataLoader all(make_dataset("gpt2", 8), {.batch_size = 8, .prefetch = 0});
    auto [sharded, loader] = accelerate(make_model("gpt2"), all, config);
    dist::reset_traffic();
    sharded->forward(*loader.begin()).loss.backward();
    bytes[quantized] = dist::traffic().bytes_of(dist::TrafficKind::all_gather);
  }
  const double ratio = static_cast<double>(bytes[1]) / static_cast<double>(bytes[0]);
  EXPECT_GT(ratio, 0.25);
  EXPECT_LT(ratio, 0.26);
}

// A few AdamW steps: the losses stay within 1% of exact gathers' (the 300-step Brown run is
// bench/strategies/quantized.sh); on one node, equal.
TEST(QuantizedGather, TrainsCloseToExactGathers) {
  constexpr int64_t kSteps = 3, kGlobalBatch = 8;
  const RunResult exact = run_accelerated("gpt2", quantized_config(false), kSteps, kGlobalBatch);
  const RunResult quantized = run_accelerated("gpt2", quantized_config(true), kSteps, kGlobalBatch);
  if (!crosses_nodes()) {
    EXPECT_EQ(quantized.losses, exact.losses);
    return;
  }
  EXPECT_TRUE(all_close(quantized.losses, exact.losses, 1e-2f, 0.f));
  EXPECT_NE(quantized.losses, exact.losses) << "nothing was quantized";
}

}  // namespace
}  // namespace acc::test
