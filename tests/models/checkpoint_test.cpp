// Whole-model safetensors files: Hugging Face layout (GPT-2 Conv1D transposed), round trips,
// files in the original Hugging Face naming, and every mismatch reported at once.
#include <gtest/gtest.h>

#include <filesystem>

#include "acc/io/safetensors.h"
#include "acc/models/checkpoint.h"
#include "acc/models/gpt2.h"
#include "acc/models/llama.h"
#include "acc/nn/deferred_init.h"
#include "acc/ops/ops.h"

namespace acc {
namespace {

models::GPT2Config micro_gpt2() {
  models::GPT2Config c;
  c.vocab_size = 37;
  c.n_positions = 8;
  c.n_embd = 12;
  c.n_layer = 2;
  c.n_head = 2;
  return c;
}

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("acc_models_ckpt_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

void expect_same_parameters(const models::Model& a, const models::Model& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i].second.to_vector(), pb[i].second.to_vector()) << pa[i].first;
}

TEST_F(Checkpoint, Gpt2FileUsesConv1DLayoutAndRoundTrips) {
  models::GPT2 saved(micro_gpt2(), 1), loaded(micro_gpt2(), 2);
  models::save_model(saved, dir_ / "m.safetensors");
  io::SafetensorsReader reader(dir_ / "m.safetensors");
  EXPECT_EQ(reader.metadata().at("format"), "pt");
  const std::string name = "transformer.h.1.attn.c_attn.weight";
  ASSERT_EQ(reader.entry(name).shape, (Shape{12, 36}));  // [in, out], as transformers stores it
  EXPECT_EQ(reader.read(name).to_vector(), ops::transpose(saved.parameter(name)).to_vector());
  EXPECT_EQ(reader.entry("transformer.h.0.attn.c_attn.bias").shape, Shape{36});
  EXPECT_FALSE(reader.contains("lm_head.weight"));  // tied to wte
  models::load_model(loaded, dir_ / "m.safetensors");
  expect_same_parameters(saved, loaded);
}

TEST_F(Checkpoint, LoadingIntoADeferredModelSaysWhatToDoInstead) {
  models::GPT2 saved(micro_gpt2(), 1);
  models::save_model(saved, dir_ / "m.safetensors");
  std::unique_ptr<models::GPT2> deferred;
  {
    nn::DeferredInit scope;
    deferred = std::make_unique<models::GPT2>(micro_gpt2(), 2);
  }
  try {
    models::load_model(*deferred, dir_ / "m.safetensors");
    FAIL() << "loading into a model without memory did not fail";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("deferred initialisation"), std::string::npos) << what;
    EXPECT_NE(what.find("m.safetensors"), std::string::npos) << what;
  }
}

TEST_F(Checkpoint, LoadsOriginalHuggingFaceGpt2Naming) {
  // The "gpt2" hub files: no "transformer." prefix, causal-mask buffers, and here bf16 data.
  models::GPT2 source(micro_gpt2(), 3), target(micro_gpt2(), 4);
  std::vector<std::pair<std::string, Tensor>> entries;
  for (const auto& [name, p] : source.named_parameters()) {
    Tensor t = source.stored_transposed(name) ? ops::transpose(p) : p.detach();
    entries.emplace_back(name.substr(std::string("transformer.").size()), t.to(DType::bf16));
  }
  entries.emplace_back("h.0.attn.bias", Tensor::full({1, 1, 8, 8}, 1.0));
  entries.emplace_back("h.1.attn.masked_bias", Tensor::full({}, -1e4));
  io::save_safetensors(dir_ / "hf.safetensors", entries);
  models::load_model(target, dir_ / "hf.safetensors");
  const auto ps = source.named_parameters(), pt = target.named_parameters();
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_EQ(pt[i].second.to_vector(), ps[i].second.to(DType::bf16).to_vector()) << ps[i].first;
}

TEST_F(Checkpoint, ReportsEveryMismatchAtOnceAndLeavesModelUntouched) {
  models::GPT2 source(micro_gpt2(), 5), target(micro_gpt2(), 6);
  std::vector<std::pair<std::string, Tensor>> entries;
  for (const auto& [name, p] : source.named_parameters()) {
    if (name == "transformer.ln_f.bias") continue;  // missing
    // Wrong layout: acc's [out, in] where the file must hold [in, out].
    entries.emplace_back(name, name == "transformer.h.1.mlp.c_fc.weight" ? p.detach()
                               : source.stored_transposed(name) ? ops::transpose(p) : p.detach());
  }
  entries.emplace_back("transformer.h.7.ln_1.weight", Tensor::zeros({12}));  // unexpected
  io::save_safetensors(dir_ / "bad.safetensors", entries);
  const auto before = target.parameter("transformer.wte.weight").to_vector();
  try {
    models::load_model(target, dir_ / "bad.safetensors");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const char* part : {"transformer.ln_f.bias", "transformer.h.7.ln_1.weight",
                             "transformer.h.1.mlp.c_fc.weight: file f32[48, 12]", "[12, 48]"})
      EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
  }
  EXPECT_EQ(target.parameter("transformer.wte.weight").to_vector(), before);
  const auto problems = models::check_model_file(target, dir_ / "bad.safetensors");
  EXPECT_EQ(problems.missing.size(), 1u);
  EXPECT_EQ(problems.unexpected.size(), 1u);
  EXPECT_EQ(problems.mismatched.size(), 1u);
  // Another model's file would list every tensor: the first 8 of a kind, then how many more.
  models::LoadProblems many;
  for (int i = 0; i < 20; ++i) many.unexpected.push_back("t" + std::to_string(i));
  const std::string text = many.describe();
  EXPECT_NE(text.find("20 unexpected in the file:\n    t0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    t7\n    ... and 12 more"), std::string::npos) << text;
  EXPECT_EQ(text.find("t8"), std::string::npos) << text;
}

TEST_F(Checkpoint, LlamaRoundTripKeepsLayout) {
  models::LlamaConfig c = models::LlamaConfig::tiny();
  c.vocab_size = 41;
  c.hidden_size = 16;
  c.intermediate_size = 20;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 4;
  c.max_position_embeddings = 8;
  models::Llama saved(c, 1), loaded(c, 2);
  models::save_model(saved, dir_ / "l.safetensors");
  io::SafetensorsReader reader(dir_ / "l.safetensors");
  EXPECT_EQ(reader.entry("model.layers.0.self_attn.k_proj.weight").shape, (Shape{8, 16}));
  EXPECT_EQ(reader.entry("lm_head.weight").shape, (Shape{41, 16}));
  models::load_model(loaded, dir_ / "l.safetensors");
  expect_same_parameters(saved, loaded);
}

TEST_F(Checkpoint, BadFileIsOneClearError) {
  models::GPT2 model(micro_gpt2());
  EXPECT_THROW(models::load_model(model, dir_ / "absent.safetensors"), Error);
}

}  // namespace
}  // namespace acc
