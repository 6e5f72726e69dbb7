// summon_full_params() under tensor parallelism (the fsdp-tp rules on (1, 1), (1, 2) or (2, 2)):
// the wrapped model's parameters are whole and its modules compute as the plain model's, so
// generation and evaluation through module() work as under FSDP; afterwards the slices are
// back and training goes on; writeback puts what the scope changed into every rank's slice.
#include <gtest/gtest.h>

#include "acc/autograd/grad_mode.h"
#include "spmd_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

class SummonTensorParallel : public ::testing::TestWithParam<std::string> {};  // family

TEST_P(SummonTensorParallel, TheModuleIsWholeAndEvaluatesAsOneProcess) {
  const std::string kind = GetParam();
  data::DataLoader loader(make_dataset(kind, 8), {.batch_size = 8, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(make_model(kind), loader, fsdp_tp_config(kind));
  auto one = make_model(kind);
  const data::Batch whole_batch = *loader.begin();
  const data::Batch batch = *rank_loader.begin();
  autograd::NoGradGuard no_grad;
  const float sharded_loss = sharded->forward(batch).loss.item();
  {
    auto scope = sharded->summon_full_params();
    const auto params = sharded->module().named_parameters();
    const auto expected = one->named_parameters();
    ASSERT_EQ(params.size(), expected.size());
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_EQ(params[i].second.shape(), expected[i].second.shape()) << expected[i].first;
      EXPECT_EQ(params[i].second.to_vector(), expected[i].second.to_vector()) << expected[i].first;
    }
    // The module alone, on this rank, on the whole batch: one process's loss and logits
    // (the same products, summed in another order where the slices were reduced).
    const auto out = sharded->module().forward(whole_batch);
    const auto ref = one->forward(whole_batch);
    EXPECT_NEAR(out.loss.item(), ref.loss.item(), 1e-5 * std::abs(ref.loss.item()));
    auto causal = std::dynamic_pointer_cast<models::CausalLM>(sharded->module_ptr());
    ASSERT_TRUE(causal);
    const Tensor logits = causal->logits(whole_batch["input_ids"]);
    const Tensor ref_logits = std::dynamic_pointer_cast<models::CausalLM>(one)->logits(whole_batch["input_ids"]);
    EXPECT_TRUE(all_close(logits.to_vector(), ref_logits.to_vector(), 1e-5f, 1e-5f));
    // The wrapped model's forward in the scope returns the module's logits: whole over the
    // vocabulary (the head is joined, nothing to gather), this rank's samples.
    const auto wrapped = sharded->forward(batch);
    const auto module_out = sharded->module().forward(batch);
    ASSERT_TRUE(wrapped.logits.defined() && module_out.logits.defined());
    EXPECT_EQ(wrapped.logits.shape(), module_out.logits.shape());
    EXPECT_EQ(wrapped.logits.to_vector(), module_out.logits.to_vector());
  }
  // The slices and the tensor-parallel modules are back: the sharded forward is unchanged.
  EXPECT_EQ(sharded->forward(batch).loss.item(), sharded_loss);
}

TEST_P(SummonTensorParallel, WritebackReachesEverySlice) {
  const std::string kind = GetParam();
  data::DataLoader loader(make_dataset(kind, 8), {.batch_size = 8, .prefetch = 0});
  auto sharded = accelerate(make_model(kind), loader, fsdp_tp_config(kind)).model;
  // A column-parallel weight (split by rows) and a row-parallel one (split by columns).
  const std::vector<std::string> names = kind == "gpt2"
      ? std::vector<std::string>{"transformer.h.1.attn.c_attn.weight", "transformer.h.1.mlp.c_proj.weight"}
      : std::vector<std::string>{"model.layers.1.self_attn.q_proj.weight", "model.layers.1.mlp.down_proj.weight"};
  {
    auto scope = sharded->summon_full_params(/*writeback=*/true);
    autograd::NoGradGuard no_grad;
    for (const auto& name : names) {
      Tensor p = sharded->module().parameter(name);
      std::vector<float> ramp(static_cast<size_t>(p.numel()));
      for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i);
      p.copy_(Tensor::from_vector(ramp, p.shape()));
    }
  }
  for (const auto& [n, t] : sharded->full_parameters())
    for (const auto& name : names)
      if (n == name) {
        const auto v = t.to_vector();
        for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<float>(i)) << n << "[" << i << "]";
      }
}

INSTANTIATE_TEST_SUITE_P(Spmd, SummonTensorParallel, ::testing::Values("gpt2", "llama"));

}  // namespace
}  // namespace acc::test
