// Llama: Hugging Face names, grouped-query shapes, forward, init keyed by name, training.
#include <gtest/gtest.h>

#include <cmath>

#include "acc/models/llama.h"
#include "lm_test_helpers.h"

namespace acc {
namespace {

using models::Llama;
using models::LlamaConfig;

LlamaConfig micro() {
  LlamaConfig c;
  c.vocab_size = 53;
  c.hidden_size = 24;
  c.intermediate_size = 44;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 6;
  c.num_key_value_heads = 2;  // grouped-query: 3 query heads per key/value head
  c.max_position_embeddings = 16;
  return c;
}

TEST(Llama, HuggingFaceNamesAndShapes) {
  Llama model(micro());
  const auto params = model.named_parameters();
  ASSERT_EQ(params.size(), 1u + 2 * 9 + 2);  // embed, 9 per layer, norm, lm_head
  EXPECT_EQ(params.front().first, "model.embed_tokens.weight");
  EXPECT_EQ(params.back().first, "lm_head.weight");
  EXPECT_EQ(model.parameter("model.layers.1.self_attn.q_proj.weight").shape(), (Shape{24, 24}));
  EXPECT_EQ(model.parameter("model.layers.1.self_attn.k_proj.weight").shape(), (Shape{8, 24}));
  EXPECT_EQ(model.parameter("model.layers.1.self_attn.v_proj.weight").shape(), (Shape{8, 24}));
  EXPECT_EQ(model.parameter("model.layers.0.mlp.gate_proj.weight").shape(), (Shape{44, 24}));
  EXPECT_EQ(model.parameter("model.layers.0.mlp.down_proj.weight").shape(), (Shape{24, 44}));
  EXPECT_EQ(model.parameter("model.layers.0.post_attention_layernorm.weight").shape(), Shape{24});
  EXPECT_EQ(model.parameter("model.norm.weight").shape(), Shape{24});
  int layers = 0;
  for (const auto& [name, m] : model.named_modules()) layers += m->type_name() == "LlamaDecoderLayer";
  EXPECT_EQ(layers, 2);
}

TEST(Llama, StructureNamesBlocksHeadEmbeddingAndSplits) {
  Llama model(micro());
  test::expect_structure(model, 2, 4);
  EXPECT_EQ(model.structure().split_together[0].members.size(), 4u);  // q, k, v, o
}

TEST(Llama, ForwardShapesInitAndTraining) {
  Llama model(micro(), 4);
  auto out = model.forward(test::token_batch(3, 5, 53, 1));
  EXPECT_FALSE(out.logits.defined());  // a training forward: the loss without the logits
  EXPECT_NEAR(out.loss.item(), std::log(53.0), 0.1);
  test::expect_training_loss_without_logits(model, test::token_batch(3, 5, 53, 1));
  const std::string w = "model.layers.0.self_attn.o_proj.weight";
  EXPECT_EQ(model.parameter(w).to_vector(), Tensor::randn({24, 24}, 4, w, 0.f, 0.02f).to_vector());
  test::expect_loss_falls(model, test::token_batch(2, 8, 53, 9));
}

TEST(LlamaConfig, RejectsBadShapes) {
  LlamaConfig c = micro();
  c.num_key_value_heads = 4;  // 6 query heads do not group into 4
  EXPECT_THROW(Llama{c}, Error);
  EXPECT_THROW(LlamaConfig::from_name_or_file("medium"), Error);
  EXPECT_EQ(LlamaConfig::from_name_or_file("tiny").num_key_value_heads, 2);
}

}  // namespace
}  // namespace acc
