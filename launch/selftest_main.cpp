// acc_selftest: what `accelerate test` launches. A few AdamW steps of a small GPT-2 under the
// config in use (ACC_CONFIG_FILE), on every rank, next to the same steps on one process through
// the same engine; prints PASS or what differs. Exit status 0 on PASS.
#include <acc/acc.h>

#include <cmath>
#include <cstdio>

#include "acc/distributed/single_process_group.h"
#include "acc/train/cli.h"
#include "acc/plugin/registry.h"

namespace {

constexpr int64_t kSteps = 3, kBatch = 8, kSeq = 16, kVocab = 512;

std::shared_ptr<acc::models::Model> small_gpt2() {
  auto c = acc::models::GPT2Config::tiny();
  c.vocab_size = kVocab;
  c.n_layer = 2;
  c.n_embd = 64;
  c.n_head = 2;
  c.n_positions = kSeq;
  return std::make_shared<acc::models::GPT2>(c, /*seed=*/0);
}

// Token windows from a fixed formula: the same batches on every rank and run.
class Tokens final : public acc::data::Dataset {
 public:
  int64_t size() const override { return kSteps * kBatch; }
  acc::data::Batch get_batch(std::span<const int64_t> idx, const acc::data::EpochKey&) const override {
    std::vector<int32_t> ids, labels;
    for (int64_t i : idx)
      for (int64_t t = 0; t < kSeq; ++t) {
        ids.push_back(static_cast<int32_t>((i * 31 + t * 7) % kVocab));
        labels.push_back(static_cast<int32_t>((i * 31 + (t + 1) * 7) % kVocab));
      }
    const int64_t b = static_cast<int64_t>(idx.size());
    acc::data::Batch batch;
    batch.set("input_ids", acc::Tensor::from_vector_i32(ids, {b, kSeq}));
    batch.set("labels", acc::Tensor::from_vector_i32(labels, {b, kSeq}));
    return batch;
  }
};

std::vector<float> train(acc::ShardedModel& model, acc::data::DataLoader& loader, acc::dist::ProcessGroup& group) {
  acc::optim::AdamW opt(model.param_groups(0.1), {.lr = 1e-3});
  std::vector<float> losses;
  for (auto& batch : loader) {
    opt.zero_grad();
    acc::Tensor loss = model.forward(batch).loss;
    loss.backward();
    model.clip_grad_norm(1.0);
    opt.step();
    acc::Tensor mean = acc::Tensor::from_vector({loss.item() / static_cast<float>(group.size())}, {1});
    group.all_reduce(mean);
    losses.push_back(mean.item());
  }
  return losses;
}

}  // namespace

int main(int argc, char** argv) {
  acc::Session session(argc, argv);
  return acc::train::run_program("acc_selftest", [] {
    acc::Config config = acc::Config::load();
    acc::data::DataLoader all(std::make_shared<Tokens>(), {.batch_size = kBatch, .prefetch = 0});
    auto [sharded, loader] = acc::accelerate(small_gpt2(), all, config);
    const auto losses = train(*sharded, loader, acc::world());

    acc::Config one = config;  // the reference: the same engine on this process alone
    one.dist.distributed_type = acc::DistributedType::NO;
    one.dist.strategy.clear();
    auto strategy = acc::plugin::Registry::global().make_strategy(one.strategy_name());
    auto alone = std::make_shared<acc::dist::SingleProcessGroup>();
    strategy->setup(alone, acc::dist::Topology{}, one);
    auto reference_model = strategy->wrap(small_gpt2());
    const auto reference = train(*reference_model, all, *alone);

    // f32 differs only in the order of additions; bf16 rounds the gathered weights.
    const double rtol = config.compute.bf16 ? 2e-2 : 1e-4;
    bool ok = losses.size() == reference.size();
    for (size_t i = 0; ok && i < losses.size(); ++i)
      ok = std::abs(losses[i] - reference[i]) <= rtol * std::abs(reference[i]);
    if (acc::world().rank() == 0) {
      std::printf("accelerate test: %s on %d ranks%s, %lld steps of a small GPT-2\n",
                  config.strategy_name().c_str(), acc::world().size(),
                  config.compute.bf16 ? ", bf16" : "", static_cast<long long>(kSteps));
      for (size_t i = 0; i < losses.size(); ++i)
        std::printf("  step %zu: loss %.6f, one process %.6f\n", i + 1, losses[i], reference[i]);
      std::printf("accelerate test: %s\n", ok ? "PASS" : "FAIL: the sharded run differs from one process");
    }
    return ok ? 0 : 1;
  });
}
