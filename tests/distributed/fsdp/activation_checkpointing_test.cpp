// fsdp_activation_checkpointing: each unit keeps only its input and recomputes its forward in
// backward. Recomputing runs the same kernels on the same values, so training is unchanged bit
// for bit, under every strategy and in bf16; the activations held at the peak shrink.
#include <gtest/gtest.h>

#include "acc/memory/allocator.h"
#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

using Case = std::tuple<std::string, std::string, bool>;  // strategy, model, bf16

class ActivationCheckpointing : public ::testing::TestWithParam<Case> {};

TEST_P(ActivationCheckpointing, TrainsBitForBitAsWithout) {
  const auto& [strategy, kind, bf16] = GetParam();
  Config config = strategy_config(strategy, kind, bf16);
  const RunResult plain = run_accelerated(kind, config, 3, 8);
  config.dist.fsdp.activation_checkpointing = true;
  const RunResult recomputed = run_accelerated(kind, config, 3, 8);
  EXPECT_EQ(recomputed.losses, plain.losses);
  EXPECT_EQ(recomputed.norms, plain.norms);
  EXPECT_EQ(recomputed.params, plain.params);
}

// fsdp_activation_checkpointing as a class list: modules of those classes, inside a unit
// (GPT2MLP, LlamaMLP) or units themselves (GPT2Block), the same bits again.
TEST(ActivationCheckpointingByClass, TrainsBitForBitAsWithout) {
  for (const auto& [kind, classes, bf16] :
       {std::tuple<std::string, std::vector<std::string>, bool>{"gpt2", {"GPT2MLP"}, false},
        {"gpt2", {"GPT2MLP", "GPT2Block"}, true},
        {"llama", {"LlamaMLP"}, false}}) {
    Config config = strategy_config("FULL_SHARD", kind, bf16);
    const RunResult plain = run_accelerated(kind, config, 3, 8);
    config.dist.fsdp.activation_checkpointing_cls = classes;
    const RunResult recomputed = run_accelerated(kind, config, 3, 8);
    EXPECT_EQ(recomputed.losses, plain.losses) << kind << " " << classes.front();
    EXPECT_EQ(recomputed.params, plain.params) << kind << " " << classes.front();
  }
}

TEST(ActivationCheckpointingByClass, AnAbsentClassIsNamed) {
  Config config = strategy_config("FULL_SHARD", "gpt2");
  config.dist.fsdp.activation_checkpointing_cls = {"GPT2Mlp"};
  EXPECT_NE(error_of([&] { run_accelerated("gpt2", config, 1, 8); })
                .find("no module of class 'GPT2Mlp' in GPT2LMHeadModel (its classes: "),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, ActivationCheckpointing,
    ::testing::Values(Case{"FULL_SHARD", "gpt2", false}, Case{"FULL_SHARD", "gpt2", true},
                      Case{"SHARD_GRAD_OP", "gpt2", false}, Case{"NO_SHARD", "gpt2", true},
                      Case{"HYBRID_SHARD", "llama", false}, Case{"FULL_SHARD", "llama", true}),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + std::get<1>(info.param) +
             (std::get<2>(info.param) ? "_bf16" : "_f32");
    });

// Token windows of tiny's context length.
class LongWindows final : public data::Dataset {
 public:
  static constexpr int64_t kSeq = 256;
  int64_t size() const override { return 16; }
  data::Batch get_batch(std::span<const int64_t> idx, const data::EpochKey&) const override {
    const int64_t b = static_cast<int64_t>(idx.size());
    std::vector<int32_t> ids(static_cast<size_t>(b * kSeq)), labels(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = static_cast<int32_t>((i * 7919 + static_cast<size_t>(idx[0])) % 512);
      labels[i] = static_cast<int32_t>((i * 104729 + 3) % 512);
    }
    data::Batch batch;
    batch.set("input_ids", Tensor::from_vector_i32(ids, {b, kSeq}));
    batch.set("labels", Tensor::from_vector_i32(labels, {b, kSeq}));
    return batch;
  }
};

// GPT-2 tiny's blocks (4 of width 128) at its full context, batch 16 x 256: the activation
// peak of one step.
int64_t activation_peak(bool checkpointing, std::vector<std::string> classes = {}) {
  Config config;
  config.dist.distributed_type = DistributedType::FSDP;
  config.dist.fsdp.wrap_layer_cls = {"GPT2Block"};
  config.dist.fsdp.activation_checkpointing = checkpointing;
  config.dist.fsdp.activation_checkpointing_cls = std::move(classes);
  auto c = models::GPT2Config::tiny();
  c.vocab_size = 512;  // the head's logits are no unit's: keep them from dominating
  data::DataLoader loader(std::make_shared<LongWindows>(), {.batch_size = 16, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(std::make_shared<models::GPT2>(c, 0), loader, config);
  memory::reset_peaks();
  const int64_t before = memory::report()[memory::Category::activations].current;
  for (auto& batch : rank_loader) sharded->forward(batch).loss.backward();
  return memory::report()[memory::Category::activations].peak - before;
}

TEST(ActivationCheckpointing, HoldsAFractionOfTheActivations) {
  const int64_t without = activation_peak(false), with = activation_peak(true);
  std::printf("activation peak per rank: %.2f MB without, %.2f MB with checkpointing (%.2fx)\n",
              without / 1e6, with / 1e6, static_cast<double>(with) / static_cast<double>(without));
  EXPECT_LE(static_cast<double>(with), 0.4 * static_cast<double>(without));
  // Only the MLPs: their 4C-wide hidden activations go, the attention's stay.
  const int64_t mlp_only = activation_peak(false, {"GPT2MLP"});
  std::printf("with only GPT2MLP checkpointed: %.2f MB (%.2fx)\n", mlp_only / 1e6,
              static_cast<double>(mlp_only) / static_cast<double>(without));
  EXPECT_LT(mlp_only, without * 3 / 4);
  EXPECT_GT(mlp_only, with);
}

}  // namespace
}  // namespace acc::test
