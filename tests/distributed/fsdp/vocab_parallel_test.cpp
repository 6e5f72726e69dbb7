// fsdp_vocab_parallel: the token embedding and the head stay split by vocabulary rows (tied in
// GPT-2, two weights in Llama) and their ops exchange activations instead of gathering them.
// One backward gives the gradients the gathered embedding and head give, on every rank's
// pieces; evaluation (which gathers) computes the same loss; ranks that scale their losses
// differently get an error. Memory is in memory_test.cpp, training against one process in
// equivalence_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "acc/autograd/grad_mode.h"

#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

struct Pass {
  float loss = 0;
  float eval_loss = 0;  // the same batch under NoGradGuard (the vocabulary units gathered)
  std::map<std::string, std::vector<float>> grads;  // whole, assembled from every rank's pieces
};

Pass one_backward(const std::string& strategy, const std::string& kind, bool vocab_parallel) {
  Config config = strategy_config(strategy, kind);
  config.dist.fsdp.vocab_parallel = vocab_parallel;
  data::DataLoader loader(make_dataset(kind, 8), {.batch_size = 8, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(make_model(kind), loader, config);
  Pass pass;
  for (auto& batch : rank_loader) {
    auto out = sharded->forward(batch);
    pass.loss = out.loss.item();
    out.loss.backward();
    // Each rank's pieces into zeros of the whole shape, summed over the world; replicas
    // (hybrid: every shard group holds the same pieces) counted once.
    const int replicas = world().size() / shard_ranks(parse_sharding_strategy(strategy, "test"));
    std::map<std::string, Tensor> whole;  // every parameter, in the same order on every rank
    for (const auto& [name, p] : make_model(kind)->named_parameters()) whole[name] = Tensor::zeros({p.numel()});
    for (const auto& piece : sharded->parameter_pieces())
      whole.at(piece.name).slice_flat(piece.begin, {piece.master.numel()}).copy_(piece.master.grad());
    for (auto& [name, g] : whole) {
      world().all_reduce(g);
      auto& values = pass.grads[name] = g.to_vector();
      for (float& v : values) v /= static_cast<float>(replicas);
    }
    autograd::NoGradGuard no_grad;
    pass.eval_loss = sharded->forward(batch).loss.item();
    break;
  }
  return pass;
}

using Case = std::tuple<std::string, std::string>;  // strategy, model
class VocabParallel : public ::testing::TestWithParam<Case> {};

// f32: the two paths differ in the order of additions only: each row's softmax is combined
// from the ranks' pieces, and the hidden states' gradient is summed from each rank's rows of
// the vocabulary (relative 1e-7 each). Gradients are sums of many terms of both signs, so the
// bound is normwise: every element within 1e-5 of its parameter's largest gradient.
TEST_P(VocabParallel, GradientsEqualTheGatheredHeads) {
  if (world().size() == 1) GTEST_SKIP() << "one rank gathers: nothing is split";
  const auto& [strategy, kind] = GetParam();
  const Pass split = one_backward(strategy, kind, true), gathered = one_backward(strategy, kind, false);
  EXPECT_NEAR(split.loss, gathered.loss, 1e-5 * std::abs(gathered.loss));
  EXPECT_NEAR(split.eval_loss, split.loss, 1e-5 * std::abs(split.loss)) << "evaluation gathers the units";
  ASSERT_EQ(split.grads.size(), gathered.grads.size());
  for (const auto& [name, want] : gathered.grads) {
    const std::vector<float>& got = split.grads.at(name);
    ASSERT_EQ(got.size(), want.size()) << name;
    float largest = 0, worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      largest = std::max(largest, std::abs(want[i]));
      worst = std::max(worst, std::abs(got[i] - want[i]));
    }
    EXPECT_GT(largest, 0.f) << name << " got no gradient";
    EXPECT_LE(worst, 1e-5f * largest) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Fsdp, VocabParallel,
                         ::testing::Values(Case{"FULL_SHARD", "gpt2"}, Case{"FULL_SHARD", "llama_odd_vocab"},
                                           Case{"SHARD_GRAD_OP", "llama"}, Case{"HYBRID_SHARD", "gpt2"},
                                           Case{"HYBRID_SHARD_ZERO2", "llama"}),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

// The head's weight gradient sums every rank's tokens in one product, so it takes one scale.
TEST(VocabParallel, RanksThatScaleTheirLossesDifferentlyAreAnError) {
  if (world().size() == 1) GTEST_SKIP() << "one rank gathers: nothing is split";
  data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 8, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(make_model("gpt2"), loader, strategy_config("FULL_SHARD", "gpt2"));
  for (auto& batch : rank_loader) {
    const Tensor loss = sharded->forward(batch).loss;
    const std::string error = error_of([&] { ops::scale(loss, world().rank() == 0 ? 2.0 : 1.0).backward(); });
    EXPECT_NE(error.find("different scales"), std::string::npos) << error;
    EXPECT_NE(error.find("fsdp_vocab_parallel: false"), std::string::npos) << error;
    break;
  }
}

}  // namespace
}  // namespace acc::test
