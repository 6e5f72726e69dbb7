// Gradient buckets (fsdp_bucket_mb): a unit's gradients are reduced in buckets, one collective
// per bucket instead of one per parameter, with the results of one process; a parameter that a
// rank's branch does not reach counts as a zero gradient there.
#include <gtest/gtest.h>

#include <map>

#include "acc/distributed/traffic.h"
#include "acc/nn/layers.h"
#include "acc/ops/elementwise.h"
#include "acc/ops/reduce.h"
#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

// 16 KiB: a dozen buckets per block of the test's GPT-2, and parameters that span two.
constexpr double kSmallBucketMb = 1.0 / 64;

// Reduce-scatters one backward issues: one per bucket, Σ over units of ⌈trainable / bucket⌉.
TEST(Buckets, OneReductionPerBucket) {
  const int p = world().size();
  for (const double mb : {25.0, kSmallBucketMb}) {
    Config config = strategy_config("FULL_SHARD", "gpt2");
    config.dist.fsdp.vocab_parallel = false;  // its ops reduce-scatter activations too
    config.dist.fsdp.bucket_mb = mb;
    auto model = make_model("gpt2");
    // The units: each block (transformer.h.k) and the root with the rest.
    std::map<std::string, int64_t> unit_numel;
    int64_t parameters = 0;
    for (const auto& [name, param] : model->named_parameters()) {
      const bool in_block = name.starts_with("transformer.h.");
      const std::string unit = in_block ? name.substr(0, name.find('.', sizeof "transformer.h.")) : "";
      unit_numel[unit] += param.numel();
      ++parameters;
    }
    const auto bucket = static_cast<int64_t>(mb * (1 << 20) / 4);
    uint64_t expected = 0;
    for (const auto& [_, numel] : unit_numel) expected += static_cast<uint64_t>((numel + bucket - 1) / bucket);

    data::DataLoader all(make_dataset("gpt2", 8), {.batch_size = 8});
    auto [sharded, loader] = accelerate(model, all, config);
    dist::reset_traffic();
    sharded->forward(*loader.begin()).loss.backward();
    const uint64_t calls = dist::traffic().calls_of(dist::TrafficKind::reduce_scatter);
    EXPECT_EQ(calls, p == 1 ? 0u : expected) << "fsdp_bucket_mb " << mb;
    if (mb > 1) {
      EXPECT_EQ(expected, unit_numel.size()) << "one bucket per unit";
      EXPECT_LT(expected, static_cast<uint64_t>(parameters));
    }
  }
}

// Buckets that split parameters, through every FSDP setting that reduces differently.
TEST(Buckets, SmallBucketsTrainAsOneProcess) {
  constexpr int64_t kSteps = 2, kGlobalBatch = 8;
  const RunResult single = run_single_process("gpt2", kSteps, kGlobalBatch);
  for (const std::string strategy : {"FULL_SHARD", "NO_SHARD", "HYBRID_SHARD_ZERO2"}) {
    Config config = strategy_config(strategy, "gpt2");
    config.dist.fsdp.bucket_mb = kSmallBucketMb;
    const RunResult run = run_accelerated("gpt2", config, kSteps, kGlobalBatch);
    // The equivalence test's f32 bounds (equivalence_test.cpp says why).
    EXPECT_TRUE(all_close(run.losses, single.losses, 1e-5f, 0.f)) << strategy;
    EXPECT_TRUE(all_close(run.norms, single.norms, 1e-5f, 0.f)) << strategy << " gradient norms";
    ASSERT_EQ(run.params.size(), single.params.size());
    for (size_t i = 0; i < single.params.size(); ++i)
      EXPECT_TRUE(all_close(run.params[i].second, single.params[i].second, 1e-5f,
                            f32_param_atol("gpt2", strategy)))
          << strategy << " " << single.params[i].first;
  }
}

// Two layers in one unit; the second runs only where `branch` is set.
class Branching final : public models::Model {
 public:
  explicit Branching(bool branch) : Model("Branching"), branch_(branch) {
    first_ = register_module("first", std::make_shared<nn::Linear>(4, 4));
    second_ = register_module("second", std::make_shared<nn::Linear>(4, 4));
  }
  models::ModelOutput forward(const data::Batch& batch) override {
    Tensor h = (*first_)(batch["x"]);
    if (branch_) h = (*second_)(h);
    return {Tensor(), ops::mean(ops::mul(h, h))};
  }
  double train_flops_per_token(int64_t) const override { return 0; }

 private:
  bool branch_;
  std::shared_ptr<nn::Linear> first_, second_;
};

// Sample i's features: 4 values that differ by sample and feature.
class Features final : public data::Dataset {
 public:
  int64_t size() const override { return 64; }
  data::Batch get_batch(std::span<const int64_t> indices, const data::EpochKey&) const override {
    std::vector<float> x;
    for (const int64_t i : indices)
      for (int j = 0; j < 4; ++j) x.push_back(0.1f * static_cast<float>((i + 1) * (j + 1) % 7) - 0.3f);
    data::Batch batch;
    batch.set("x", Tensor::from_vector(x, {static_cast<int64_t>(indices.size()), 4}));
    return batch;
  }
};

// The second layer's gradient: the last rank's, averaged with zeros from the others, as the
// mean loss over all ranks' samples has it.
TEST(Buckets, ABranchNotTakenCountsAsZeroGradient) {
  const int p = world().size();
  const bool branch = world().rank() == p - 1;
  Config config = strategy_config("FULL_SHARD", "mlp");
  config.dist.fsdp.auto_wrap_policy = WrapPolicy::NO_WRAP;  // one unit holds both layers
  config.dist.fsdp.auto_wrap_policy_set = true;
  data::DataLoader all(std::make_shared<Features>(), {.batch_size = 2 * p, .prefetch = 0});

  // This rank's gradient of its own samples' mean loss, through a plain copy of the model.
  auto model = std::make_shared<Branching>(branch);
  auto plain = std::make_shared<Branching>(branch);
  for (const auto& [name, param] : model->named_parameters()) Tensor(plain->parameter(name)).copy_(param);
  auto [sharded, loader] = accelerate(model, all, config);
  const data::Batch features = *loader.begin();
  plain->forward(features).loss.backward();
  std::map<std::string, Tensor> expected;
  for (const auto& [name, param] : plain->named_parameters()) {
    Tensor mean = param.grad().defined() ? param.grad().clone() : Tensor::zeros(param.shape());
    world().all_reduce(mean, dist::ReduceOp::avg);
    expected[name] = mean.view({mean.numel()});
  }

  sharded->forward(features).loss.backward();
  for (const auto& piece : sharded->parameter_pieces()) {
    ASSERT_TRUE(piece.master.grad().defined()) << piece.name;
    const Tensor want = expected.at(piece.name).slice_flat(piece.begin, {piece.master.numel()});
    EXPECT_TRUE(all_close(piece.master.grad().to_vector(), want.to_vector(), 1e-6f, 1e-7f)) << piece.name;
  }
}

}  // namespace
}  // namespace acc::test
