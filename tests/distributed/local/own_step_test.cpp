// ShardedModel::own_step, the hook through which a strategy runs a step's forwards and backwards
// itself (as a pipeline schedule will). The microbatch test plugin, built as a third party
// builds it, runs each training step as two microbatches; through the user's unchanged loop
// (forward, loss.backward(), optimizer step) it trains as the plain model does on the same
// batches.
#include <gtest/gtest.h>

#include <cmath>

#include "acc/models/gpt2.h"
#include "acc/ops/elementwise.h"
#include "acc/ops/loss.h"
#include "acc/optim/optim.h"
#include "acc/plugin/registry.h"
#include "models/lm_test_helpers.h"

namespace acc {
namespace {

// Five rows (microbatches of 3 and 2) with some labels ignored, so the microbatches' losses
// weigh differently in the batch's mean.
data::Batch batch(uint64_t seed) {
  data::Batch b = test::token_batch(5, 8, static_cast<int32_t>(test::gpt2_micro().vocab_size), seed);
  auto labels = b["labels"].to_vector_i64();
  std::vector<int32_t> kept(labels.begin(), labels.end());
  for (size_t i = 0; i < kept.size(); i += 3) kept[i] = ops::kIgnoreIndex;
  b.set("labels", Tensor::from_vector_i32(kept, {5, 8}));
  return b;
}

std::shared_ptr<ShardedModel> microbatched(std::shared_ptr<models::Model> model) {
  static plugin::Registry registry;  // a plugin is never unloaded: one registry for the tests
  if (registry.loaded().empty())
    registry.load_file(std::string(ACC_TEST_PLUGIN_DIR) + "/microbatch/" + plugin::Registry::file_name("microbatch"));
  return registry.make_strategy("third_party_microbatch")->wrap(std::move(model));
}

// f32, another summation order: |got - want| <= 1e-6 + 1e-4 |want|.
void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  EXPECT_TRUE(test::all_close(got.to_vector(), want.to_vector(), 1e-4f, 1e-6f)) << what;
}

TEST(OwnStep, GradientsArriveWithTheBackwardScaledAsTheLoss) {
  auto plain = std::make_shared<models::GPT2>(test::gpt2_micro(), 5);
  auto sharded = microbatched(std::make_shared<models::GPT2>(test::gpt2_micro(), 5));
  const data::Batch b = batch(1);
  const Tensor want = plain->forward(b).loss;
  ops::scale(want, 0.5).backward();

  const Tensor loss = sharded->forward(b).loss;
  EXPECT_NEAR(loss.item(), want.item(), 1e-5 * std::abs(want.item()));
  for (const auto& [name, p] : sharded->named_parameters())
    EXPECT_FALSE(p.grad().defined()) << name << ": a gradient before the backward";
  ops::scale(loss, 0.5).backward();  // as gradient accumulation over two batches does
  const auto got = sharded->named_parameters(), expected = plain->named_parameters();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].second.grad().defined()) << got[i].first;
    expect_close(got[i].second.grad(), expected[i].second.grad(), got[i].first);
  }
}

// A step with nothing to train (every parameter frozen) still gives a loss the user's loop can
// call backward on.
TEST(OwnStep, ALossWithoutParametersStillTakesABackward) {
  auto model = std::make_shared<models::GPT2>(test::gpt2_micro(), 5);
  for (auto& [_, p] : model->named_parameters()) p.set_requires_grad(false);
  auto sharded = microbatched(model);
  const Tensor loss = sharded->forward(batch(3)).loss;
  EXPECT_TRUE(std::isfinite(loss.item()));
  loss.backward();
  for (const auto& [name, p] : sharded->named_parameters()) EXPECT_FALSE(p.grad().defined()) << name;
}

TEST(OwnStep, TrainsAsThePlainModelThroughTheUsersLoop) {
  auto plain = std::make_shared<models::GPT2>(test::gpt2_micro(), 5);
  auto sharded = microbatched(std::make_shared<models::GPT2>(test::gpt2_micro(), 5));
  // SGD: AdamW divides by the gradient's own size, so on gradients that are zero but for
  // rounding (the key bias: softmax ignores a shift) it turns the rounding of another summation
  // order into steps of the full learning rate.
  optim::SGD plain_opt(plain->parameters(), {.lr = 0.5, .momentum = 0.9});
  optim::SGD sharded_opt(sharded->parameters(), {.lr = 0.5, .momentum = 0.9});
  for (uint64_t step = 0; step < 4; ++step) {
    const data::Batch b = batch(10 + step);
    const Tensor want = plain->forward(b).loss, got = sharded->forward(b).loss;
    EXPECT_NEAR(got.item(), want.item(), 1e-4 * std::abs(want.item())) << "step " << step;
    want.backward();
    got.backward();
    plain_opt.step();
    sharded_opt.step();
    plain_opt.zero_grad();
    sharded_opt.zero_grad();
  }
  const auto got = sharded->named_parameters(), expected = plain->named_parameters();
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i].second, expected[i].second, got[i].first);
  // Evaluation is the model's own forward: logits, no step.
  autograd::NoGradGuard no_grad;
  expect_close(sharded->forward(batch(99)).logits, plain->forward(batch(99)).logits, "logits");
}

}  // namespace
}  // namespace acc
