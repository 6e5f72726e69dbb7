// shard_output (config.dist.spmd.shard_output): the logits forward returns, as the spec asks.
// FSDPv2's default keeps each fsdp rank's samples and gathers a vocabulary split over `model`;
// [null, null, null] gathers every sample. The values are one process's logits, and a loss
// computed from the gathered logits trains as one process does on the whole batch.
#include <gtest/gtest.h>

#include "acc/autograd/grad_mode.h"
#include "acc/ops/ops.h"
#include "acc/spmd/partition_spec.h"
#include "spmd_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

constexpr int64_t kSteps = 3, kGlobalBatch = 8;

spmd::PartitionSpec replicated(const Tensor& output) { return spmd::PartitionSpec{std::vector<std::vector<std::string>>(static_cast<size_t>(output.dim()))}; }

// llama-fsdp-tp.yaml splits the head over `model` on the widest tensor-parallel mesh.
Config config_for(bool tensor_parallel, bool gather_batch) {
  Config config = tensor_parallel ? fsdp_tp_config("llama")
                                  : spmd_config("llama", {world().size(), 1});
  if (gather_batch) config.dist.spmd.shard_output.fn = replicated;
  return config;
}

std::vector<data::Batch> global_batches(int64_t count) {
  std::vector<data::Batch> batches;
  data::DataLoader loader(make_dataset("llama", count * kGlobalBatch), {.batch_size = kGlobalBatch, .prefetch = 0});
  for (auto& b : loader) batches.push_back(b);
  return batches;
}

using Case = std::tuple<bool, bool>;  // tensor parallel, gather the batch
class ShardOutput : public ::testing::TestWithParam<Case> {};

TEST_P(ShardOutput, LogitsAreOneProcessLogits) {
  const auto& [tensor_parallel, gather_batch] = GetParam();
  data::DataLoader loader(make_dataset("llama", kGlobalBatch), {.batch_size = kGlobalBatch, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(make_model("llama"), loader, config_for(tensor_parallel, gather_batch));
  auto one = make_model("llama");
  autograd::NoGradGuard no_grad;
  for (auto& batch : rank_loader) {
    const Tensor logits = sharded->forward(batch).logits;
    // Every sample, or this rank's, with the whole vocabulary either way.
    const Tensor expected = one->forward(gather_batch ? global_batches(1)[0] : batch).logits;
    ASSERT_EQ(logits.shape(), expected.shape());
    EXPECT_TRUE(all_close(logits.to_vector(), expected.to_vector(), 1e-5f, 1e-5f));
    break;
  }
}

// The loss on the whole batch's gathered logits, back-propagated through the gathers: the
// steps of one process (bounds as the SPMD equivalence test's, tensor parallel).
TEST_P(ShardOutput, LossOnGatheredLogitsTrainsAsOneProcess) {
  const auto& [tensor_parallel, gather_batch] = GetParam();
  if (!gather_batch) GTEST_SKIP() << "a loss on this rank's samples is the model's own";
  auto model = make_model("llama");
  std::dynamic_pointer_cast<models::CausalLM>(model)->set_return_logits(true);
  data::DataLoader loader(make_dataset("llama", kSteps * kGlobalBatch), {.batch_size = kGlobalBatch, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(model, loader, config_for(tensor_parallel, true));
  optim::AdamW opt(sharded->param_groups(kWeightDecay), kAdam);
  const auto global = global_batches(kSteps);
  std::vector<float> losses, norms;  // norms: Adam would hide a gradient's scale
  for (auto& batch : rank_loader) {
    if (static_cast<int64_t>(losses.size()) == kSteps) break;
    opt.zero_grad();
    const Tensor logits = sharded->forward(batch).logits;
    const Tensor& labels = global[losses.size()]["labels"];
    const Tensor loss = ops::cross_entropy(ops::reshape(logits, {labels.numel(), logits.size(-1)}),
                                           labels.view({labels.numel()}));
    loss.backward();
    norms.push_back(static_cast<float>(sharded->clip_grad_norm(kMaxNorm)));
    opt.step();
    losses.push_back(loss.item());
  }
  const RunResult single = run_single_process("llama", kSteps, kGlobalBatch);
  EXPECT_TRUE(all_close(losses, single.losses, 1e-5f, 0.f));
  EXPECT_TRUE(all_close(norms, single.norms, 1e-5f, 0.f)) << "gradient norms";
  const auto params = sharded->full_parameters();
  ASSERT_EQ(params.size(), single.params.size());
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(all_close(params[i].second.to_vector(), single.params[i].second, 1e-5f, 5e-5f)) << params[i].first;
}

INSTANTIATE_TEST_SUITE_P(Spmd, ShardOutput, ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "fsdp_tp" : "fsdp") +
                                  (std::get<1>(info.param) ? "_whole_batch" : "_default");
                         });

TEST(ShardOutput, SpecsItCannotProduceAreErrors) {
  data::DataLoader loader(make_dataset("llama", kGlobalBatch), {.batch_size = kGlobalBatch, .prefetch = 0});
  Config config = config_for(false, false);
  config.dist.spmd.shard_output.fn = [](const Tensor&) { return spmd::PartitionSpec{{{"fsdp"}, {}, {"model"}}}; };
  auto [sharded, rank_loader] = accelerate(make_model("llama"), loader, config);
  autograd::NoGradGuard no_grad;
  for (auto& batch : rank_loader) {
    const std::string error = error_of([&] { sharded->forward(batch); });
    EXPECT_NE(error.find("spmd shard_output: [fsdp, null, model]"), std::string::npos) << error;
    EXPECT_NE(error.find("the head is not split over the vocabulary"), std::string::npos) << error;
    break;
  }
}

}  // namespace
}  // namespace acc::test
