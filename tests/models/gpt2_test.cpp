// GPT-2: Hugging Face names and counts, forward shapes, deterministic init, bf16 compute,
// configs from presets and YAML, and a few training steps whose loss falls.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "acc/models/gpt2.h"
#include "acc/nn/deferred_init.h"
#include "lm_test_helpers.h"

namespace acc {
namespace {

using models::GPT2;
using models::GPT2Config;

GPT2Config micro() { return test::gpt2_micro(); }

TEST(GPT2, SmallHasHuggingFaceNamesShapesAndCount) {
  GPT2 model(GPT2Config::small());
  const auto params = model.named_parameters();
  EXPECT_EQ(model.num_parameters(), 124439808);  // transformers' GPT2LMHeadModel, tied head
  ASSERT_EQ(params.size(), 148u);                // 2 embeddings + 12 x 12 + ln_f (2)
  EXPECT_EQ(params.front().first, "transformer.wte.weight");
  EXPECT_EQ(params[1].first, "transformer.wpe.weight");
  EXPECT_EQ(params[2].first, "transformer.h.0.ln_1.weight");
  EXPECT_EQ(params.back().first, "transformer.ln_f.bias");
  EXPECT_EQ(model.parameter("transformer.h.11.attn.c_attn.weight").shape(), (Shape{2304, 768}));
  EXPECT_EQ(model.parameter("transformer.h.11.mlp.c_proj.weight").shape(), (Shape{768, 3072}));
  int blocks = 0;
  for (const auto& [name, m] : model.named_modules()) blocks += m->type_name() == "GPT2Block";
  EXPECT_EQ(blocks, 12);
}

TEST(GPT2, StructureNamesBlocksHeadEmbeddingAndSplits) {
  GPT2 model(micro());
  test::expect_structure(model, micro().n_layer, 8);  // 24 wide, 3 heads
}

TEST(GPT2, ForwardShapesAndInitialLossNearUniform) {
  GPT2 model(micro(), 3);
  auto batch = test::token_batch(2, 7, 61, 1);
  auto out = model.forward(batch);
  EXPECT_FALSE(out.logits.defined());  // a training forward: the loss without the logits
  ASSERT_EQ(out.loss.shape(), Shape{});
  // N(0, 0.02) weights give near-zero logits: the loss starts near ln(V).
  EXPECT_NEAR(out.loss.item(), std::log(61.0), 0.1);
  test::expect_training_loss_without_logits(model, batch);
}

TEST(GPT2, RejectsBadInputIds) {
  GPT2 model(micro());
  EXPECT_THROW(model.logits(Tensor::zeros({2, 17}, DType::i32)), Error);  // > n_positions
  EXPECT_THROW(model.logits(Tensor::zeros({2, 4})), Error);               // f32 ids
  data::Batch no_ids;
  EXPECT_THROW(model.forward(no_ids), Error);
}

TEST(GPT2, InitIsKeyedBySeedAndName) {
  GPT2 a(micro(), 7), b(micro(), 7), c(micro(), 8);
  const auto pa = a.named_parameters(), pb = b.named_parameters(), pc = c.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i].second.to_vector(), pb[i].second.to_vector());
  const std::string w = "transformer.h.1.attn.c_attn.weight";
  EXPECT_NE(a.parameter(w).to_vector(), c.parameter(w).to_vector());
  // The values are the (seed, qualified name) stream, so any shard can be built alone.
  EXPECT_EQ(a.parameter(w).to_vector(), Tensor::randn({72, 24}, 7, w, 0.f, 0.02f).to_vector());
  const std::string proj = "transformer.h.0.mlp.c_proj.weight";  // residual: 0.02/sqrt(2 L)
  EXPECT_EQ(a.parameter(proj).to_vector(),
            Tensor::randn({24, 96}, 7, proj, 0.f, 0.02f / std::sqrt(4.f)).to_vector());
  EXPECT_EQ(a.parameter("transformer.h.0.attn.c_attn.bias").to_vector(), std::vector<float>(72, 0.f));
}

TEST(GPT2, Bf16ParametersComputeInBf16AndStayClose) {
  // What a strategy with mixed precision does: bf16 copies of the parameters in place of the
  // f32 ones, and the model told its compute dtype. Every product then runs in bf16.
  GPT2 model(micro(), 5);
  auto batch = test::token_batch(2, 9, 61, 2);
  const float f32_loss = model.forward(batch).loss.item();
  for (const auto& [name, p] : model.named_parameters()) model.set_parameter(name, p.to(DType::bf16));
  model.set_compute_dtype(DType::bf16);
  Tensor loss = model.forward(batch).loss;
  // bf16 keeps 8 mantissa bits (relative 4e-3 per product input); the loss averages them out.
  EXPECT_NEAR(loss.item(), f32_loss, 2e-2);
  EXPECT_NE(loss.item(), f32_loss);  // really computed from the rounded weights
  loss.backward();
  for (const auto& [name, p] : model.named_parameters()) {
    EXPECT_EQ(p.dtype(), DType::bf16) << name;
    EXPECT_TRUE(p.grad().defined()) << name;
  }
  EXPECT_THROW(model.set_compute_dtype(DType::i32), Error);
}

TEST(GPT2, TrainingStepsReduceLoss) {
  GPT2 model(micro(), 1);
  test::expect_loss_falls(model, test::token_batch(2, 8, 61, 9));
}

TEST(GPT2Config, PresetsYamlAndErrors) {
  EXPECT_EQ(GPT2Config::from_name_or_file("medium").n_layer, 24);
  EXPECT_EQ(GPT2Config::from_name_or_file("tiny").n_embd, 128);
  // transformers' gpt2-large and gpt2-xl, built without memory (deferred)
  for (const auto& [name, parameters] : {std::pair{"large", int64_t{774030080}}, std::pair{"xl", int64_t{1557611200}}}) {
    nn::DeferredInit deferred;
    EXPECT_EQ(GPT2(GPT2Config::from_name_or_file(name), 0).num_parameters(), parameters) << name;
  }
  try {
    GPT2Config::from_name_or_file("huge");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("huge"), std::string::npos) << e.what();
  }
  const auto dir = std::filesystem::temp_directory_path() / "acc_models_gpt2_cfg";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ok.yaml") << "n_layer: 3\nn_embd: 96\nn_head: 6\n";
  const GPT2Config c = GPT2Config::from_name_or_file((dir / "ok.yaml").string());
  EXPECT_EQ(c.n_layer, 3);
  EXPECT_EQ(c.n_embd, 96);
  EXPECT_EQ(c.vocab_size, 50257);
  std::ofstream(dir / "bad.yaml") << "n_layers: 3\n";
  try {
    GPT2Config::from_name_or_file((dir / "bad.yaml").string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'n_layers'"), std::string::npos) << e.what();
  }
  // config.json's keys that describe the file are accepted; model_type must be this model's.
  std::ofstream(dir / "hf.yaml") << "model_type: gpt2\narchitectures: [GPT2LMHeadModel]\n"
                                    "transformers_version: 4.40.0\nn_layer: 2\n";
  EXPECT_EQ(GPT2Config::from_name_or_file((dir / "hf.yaml").string()).n_layer, 2);
  std::ofstream(dir / "llama.yaml") << "model_type: llama\n";
  try {
    GPT2Config::from_name_or_file((dir / "llama.yaml").string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model_type 'llama' is not 'gpt2'"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "indivisible.yaml") << "n_embd: 100\nn_head: 3\n";
  EXPECT_THROW(GPT2Config::from_name_or_file((dir / "indivisible.yaml").string()), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace acc
