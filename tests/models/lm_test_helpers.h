#pragma once
// Shared by the language-model tests: random token batches and a short memorisation run.
#include <gtest/gtest.h>

#include "acc/autograd/grad_mode.h"
#include "acc/models/gpt2.h"
#include "acc/models/model.h"
#include "acc/optim/optim.h"
#include "support/test_support.h"

namespace acc::test {

// A GPT-2 small enough for exact checks: 2 layers, 24 wide, 3 heads, 16 positions, a
// vocabulary of 61 (odd sizes on purpose).
inline models::GPT2Config gpt2_micro() {
  models::GPT2Config c;
  c.vocab_size = 61;
  c.n_positions = 16;
  c.n_embd = 24;
  c.n_layer = 2;
  c.n_head = 3;
  return c;
}

// input_ids and labels (the same stream shifted by one), i32 [B, T].
inline data::Batch token_batch(int64_t B, int64_t T, int32_t vocab, uint64_t seed) {
  auto ids = random_ints(B * (T + 1), seed, 0, vocab);
  std::vector<int32_t> in, out;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      in.push_back(ids[b * (T + 1) + t]);
      out.push_back(ids[b * (T + 1) + t + 1]);
    }
  data::Batch batch;
  batch.set("input_ids", Tensor::from_vector_i32(in, {B, T}));
  batch.set("labels", Tensor::from_vector_i32(out, {B, T}));
  return batch;
}

// structure(): `layers` blocks of the declared type; shared parameters, packed tensors and the
// token embedding ([V, C]) that the model has; an attention and an MLP group per layer to split
// together, naming parameters of the model by their dims, heads of `head_dim` rows (per packed
// tensor) along them.
inline void expect_structure(models::CausalLM& model, int64_t layers, int64_t head_dim) {
  const models::Structure s = model.structure();
  ASSERT_EQ(s.block_types.size(), 1u);
  int64_t blocks = 0;
  for (const auto& [name, m] : model.named_modules()) blocks += m->type_name() == s.block_types[0];
  EXPECT_EQ(blocks, layers);
  ASSERT_EQ(s.shared_parameters.size(), 1u);
  EXPECT_TRUE(model.parameter(s.shared_parameters[0]).is_same(model.head_weight()));
  const Tensor table = model.submodule(s.token_embedding).param("weight");
  EXPECT_EQ(table.shape(), (Shape{model.vocab_size(), model.head_weight().size(1)}));
  for (const auto& [name, count] : s.packed) {
    EXPECT_GT(count, 1) << name;
    EXPECT_EQ(model.parameter(name).size(0) % count, 0) << name;
  }
  const auto& groups = s.split_together;
  ASSERT_EQ(groups.size(), static_cast<size_t>(2 * layers));
  for (const auto& group : groups)
    for (const auto& m : group.members) {
      SCOPED_TRACE(m.parameter);
      const Tensor p = model.parameter(m.parameter);  // throws for a name the model lacks
      ASSERT_LT(m.dim, p.dim());
      EXPECT_EQ(m.parameter.rfind(group.module + ".", 0), 0u);
      if (m.heads > 0) {
        EXPECT_EQ(p.size(m.dim), m.heads * head_dim * (m.dim == 0 ? s.packed_sections(m.parameter) : 1));
      }
    }
}

// Memorising one batch: a working forward/backward/AdamW drives the loss to below half its
// start (random tokens start near ln(V) and 30 steps at lr 1e-2 reach well under 1).
inline void expect_loss_falls(models::Model& model, const data::Batch& batch) {
  optim::AdamW opt(model.parameters(), {.lr = 1e-2, .weight_decay = 0.0});
  float first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    opt.zero_grad();
    Tensor loss = model.forward(batch).loss;
    loss.backward();
    optim::clip_grad_norm(model.parameters(), 1.0);
    opt.step();
    (step == 0 ? first : last) = loss.item();
  }
  EXPECT_LT(last, 0.5f * first) << "first " << first << ", last " << last;
}

// A training forward computes the loss without the logits (ops::linear_cross_entropy); asked
// for them (set_return_logits) or evaluating, the model returns [B, T, V] logits, and both
// ways give the same loss and gradients.
inline void expect_training_loss_without_logits(models::CausalLM& model, const data::Batch& batch) {
  const Shape ids = batch["input_ids"].shape();
  auto run = [&](bool return_logits) {
    model.set_return_logits(return_logits);
    for (auto& p : model.parameters()) p.set_grad(Tensor());
    const auto out = model.forward(batch);
    EXPECT_EQ(out.logits.defined(), return_logits);
    if (return_logits) {
      EXPECT_EQ(out.logits.shape(), (Shape{ids[0], ids[1], model.vocab_size()}));
    }
    out.loss.backward();
    std::vector<std::vector<float>> grads;
    for (auto& p : model.parameters()) grads.push_back(p.grad().to_vector());
    return std::pair{out.loss.item(), grads};
  };
  const auto fused = run(false), unfused = run(true);
  model.set_return_logits(false);
  EXPECT_NEAR(fused.first, unfused.first, 1e-6);
  for (size_t i = 0; i < fused.second.size(); ++i)
    EXPECT_TRUE(all_close(fused.second[i], unfused.second[i], 1e-4f, 1e-7f)) << "parameter " << i;
  autograd::NoGradGuard evaluating;
  const auto eval = model.forward(batch);
  EXPECT_EQ(eval.logits.shape(), (Shape{ids[0], ids[1], model.vocab_size()}));
  EXPECT_NEAR(eval.loss.item(), fused.first, 1e-6);
}

}  // namespace acc::test
