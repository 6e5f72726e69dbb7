// Whole-model gradients against central finite differences. The op tests check each backward
// alone; this checks how a model wires them: the tied GPT-2 embedding (input lookup and output
// head must both reach wte's gradient), residual adds, split heads, rope, grouped-query heads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "acc/autograd/autograd.h"
#include "acc/models/gpt2.h"
#include "acc/models/llama.h"
#include "lm_test_helpers.h"

namespace acc {
namespace {

// Loss of one batch in double precision of the f32 forward.
double loss_of(models::CausalLM& model, const data::Batch& batch) {
  autograd::NoGradGuard no_grad;
  return model.forward(batch).loss.item();
}

// For a few elements of every parameter, the analytic gradient must match
// (L(w + eps) - L(w - eps)) / (2 eps). The weights are initialised wide (std 0.3) so every
// layer is far from linear and its gradient far from zero; the f32 loss's rounding (~1e-7
// relative) over 2 eps = 2e-3 stays below the 1e-3 absolute part of the tolerance.
void expect_gradients_match(models::CausalLM& model, int32_t vocab) {
  const data::Batch batch = test::token_batch(2, 5, vocab, 11);
  model.zero_grad();
  model.forward(batch).loss.backward();
  const double eps = 1e-3;
  for (const auto& [name, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name << " received no gradient";
    const Tensor grad = p.grad();
    float* w = p.data<float>();
    const int64_t n = p.numel();
    // Three elements spread over the tensor, plus the largest-gradient one.
    const float* g = grad.data<float>();
    const int64_t largest = std::max_element(g, g + n, [](float a, float b) {
                              return std::abs(a) < std::abs(b);
                            }) - g;
    for (int64_t i : {int64_t{0}, n / 2, n - 1, largest}) {
      const float saved = w[i];
      w[i] = saved + static_cast<float>(eps);
      const double up = loss_of(model, batch);
      w[i] = saved - static_cast<float>(eps);
      const double down = loss_of(model, batch);
      w[i] = saved;
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(g[i], numeric, 1e-3 + 2e-2 * std::abs(numeric))
          << name << " element " << i << " of " << n;
    }
  }
}

TEST(ModelGradients, GPT2MatchesFiniteDifferences) {
  models::GPT2Config c;
  c.vocab_size = 29;
  c.n_positions = 8;
  c.n_embd = 12;
  c.n_layer = 2;
  c.n_head = 3;
  c.initializer_range = 0.3f;
  models::GPT2 model(c, 5);
  expect_gradients_match(model, 29);
}

TEST(ModelGradients, LlamaMatchesFiniteDifferences) {
  models::LlamaConfig c;
  c.vocab_size = 29;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 8;
  c.initializer_range = 0.3f;
  models::Llama model(c, 5);
  expect_gradients_match(model, 29);
}

}  // namespace
}  // namespace acc
