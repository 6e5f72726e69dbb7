// Frozen parameters (requires_grad = false) inside a unit with trainable ones: trained as one
// process trains them (not at all), and they cost no gradient and no optimizer memory.
#include <gtest/gtest.h>

#include "acc/memory/allocator.h"
#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

// The token embedding (the root unit's largest part) and one block's attention weights (a
// unit that keeps trainable neighbours) are frozen, as in fine-tuning.
const std::vector<std::string> kFrozen = {"transformer.wte.weight", "transformer.h.0.attn.c_attn.weight"};

std::shared_ptr<models::Model> frozen_model() {
  auto model = make_model("gpt2");
  for (const auto& name : kFrozen) Tensor(model->parameter(name)).set_requires_grad(false);
  return model;
}

struct Trained {
  std::vector<float> losses;
  std::vector<std::pair<std::string, Tensor>> params;
  int64_t gradient_bytes = 0, optimizer_bytes = 0;  // this rank's, after the steps
};

template <class Model, class Step>
Trained train(Model& model, data::DataLoader& loader, optim::Optimizer& opt, Step mean) {
  Trained run;
  const auto before = memory::report();
  for (auto& batch : loader) {
    opt.zero_grad(/*set_to_none=*/false);
    Tensor loss = model.forward(batch).loss;
    loss.backward();
    opt.step();
    run.losses.push_back(mean(loss.item()));
  }
  const auto after = memory::report();
  run.gradient_bytes = after[memory::Category::gradients].current - before[memory::Category::gradients].current;
  run.optimizer_bytes =
      after[memory::Category::optimizer_state].current - before[memory::Category::optimizer_state].current;
  return run;
}

TEST(Frozen, TrainsAsOneProcessAndCostsNoGradientOrOptimizerMemory) {
  data::DataLoader all(make_dataset("gpt2", 24), {.batch_size = 8, .prefetch = 0});
  // One process, no strategy.
  auto plain = frozen_model();
  optim::AdamW plain_opt(plain->parameters(), kAdam);
  const Trained reference = train(*plain, all, plain_opt, [](float l) { return l; });

  const Config config = strategy_config("FULL_SHARD", "gpt2");
  auto [sharded, loader] = accelerate(frozen_model(), all, config);
  optim::AdamW opt(sharded->parameters(), kAdam);
  Trained run = train(*sharded, loader, opt, [](float l) {
    Tensor t = Tensor::from_vector({l / static_cast<float>(world().size())}, {1});
    world().all_reduce(t);
    return t.item();
  });
  run.params = sharded->full_parameters();

  // As the equivalence tests: the runs differ in the order of f32 additions, which Adam
  // amplifies where a gradient is near zero (observed 4e-6 on near-zero biases after 3 steps).
  EXPECT_TRUE(all_close(run.losses, reference.losses, 1e-5f, 0.f));
  const auto expected = plain->named_parameters();
  ASSERT_EQ(run.params.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_TRUE(all_close(run.params[i].second.to_vector(), expected[i].second.to_vector(), 1e-5f, 1e-5f))
        << expected[i].first;
  for (const auto& name : kFrozen)
    EXPECT_EQ(sharded->module().parameter(name).grad().defined(), false) << name;

  // Gradients and optimizer state hold the trainable elements once over the ranks (4 and 8
  // bytes each); a rank's part depends on where the trainable prefix of each unit falls.
  int64_t trainable = 0, frozen = 0;
  for (const auto& [name, p] : plain->named_parameters()) (p.requires_grad() ? trainable : frozen) += p.numel();
  Tensor totals = Tensor::from_vector({static_cast<float>(run.gradient_bytes), static_cast<float>(run.optimizer_bytes)}, {2});
  world().all_reduce(totals);
  const double padding = 16.0 * 4 * world().size() * 8;  // at most 16 elements per rank and unit
  EXPECT_NEAR(totals.to_vector()[0], 4.0 * static_cast<double>(trainable), padding);
  EXPECT_NEAR(totals.to_vector()[1], 8.0 * static_cast<double>(trainable), 2 * padding);
  EXPECT_GT(frozen, trainable / 2) << "the frozen part must be large enough for the check to matter";
}

}  // namespace
}  // namespace acc::test
