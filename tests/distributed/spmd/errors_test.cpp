// Specs the SPMD engine cannot run are one clear error naming the module and the spec.
#include <gtest/gtest.h>

#include <fstream>

#include "spmd_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

data::DataLoader any_loader() { return data::DataLoader(make_dataset("gpt2", 8), {.batch_size = 4}); }

// The error of accelerating `model` (make_model's GPT-2 unless given) under `rules` (a rules
// file's text, or with `file` a shipped one) on the fsdp x tp mesh.
std::string error_with_rules(const std::string& rules, std::shared_ptr<models::Model> model = nullptr,
                             const std::string& file = "") {
  const auto dir = fresh_dir("spmd_errors");
  const std::string path = (dir / "rules.yaml").string();
  std::ofstream(path) << rules;
  Config config = spmd_config("gpt2", fsdp_tp_mesh());
  config.dist.spmd.sharding_rules = file.empty() ? path : rules_path(file);
  return error_of([&] { accelerate(model ? model : make_model("gpt2"), any_loader(), config); });
}

TEST(SpmdErrors, MeshWithoutFsdpAxis) {
  Config config = spmd_config("gpt2", {world().size()});
  config.dist.spmd.axis_names = {"model"};
  expect_contains(error_of([&] { accelerate(make_model("gpt2"), any_loader(), config); }),
                  {"spmd_config.axis_names", "no `fsdp` axis"});
}

TEST(SpmdErrors, AxisTheEngineDoesNotRun) {
  Config config = spmd_config("gpt2", {world().size(), 1});
  config.dist.spmd.axis_names = {"fsdp", "data"};
  expect_contains(error_of([&] { accelerate(make_model("gpt2"), any_loader(), config); }),
                  {"'data' is not an axis"});
}

TEST(SpmdErrors, NormSplitOverModelNamesTheModule) {
  expect_contains(error_with_rules("transformer.ln_f.weight: [model]\n"),
                  {"no rule runs LayerNorm 'transformer.ln_f'", "[model]"});
}

// An embedding may split over `model` by width, but not GPT-2's token embedding: it is also the
// head, which splits over the vocabulary.
TEST(SpmdErrors, TiedEmbeddingSplitByWidth) {
  expect_contains(error_with_rules("transformer.wte.weight: [null, model]\n"),
                  {"transformer.wte.weight [null, model]", "also the causal LM head (tied)", "[model, ...]"});
}

TEST(SpmdErrors, ColumnParallelLinearNeedsItsBiasSplit) {
  expect_contains(error_with_rules("transformer.h.*.mlp.c_fc.weight: [model, null]\n"),
                  {"Linear 'transformer.h.0.mlp.c_fc'", "bias"});
}

// q split by heads with k and v whole would pair each rank's query heads with the wrong key
// heads and train something else without any shape error.
TEST(SpmdErrors, AttentionSplitsTogether) {
  const std::string rules =
      "model.layers.*.self_attn.q_proj.weight: [model, null]\n"
      "model.layers.*.self_attn.o_proj.weight: [null, model]\n";
  expect_contains(error_with_rules(rules, make_model("llama")),
                  {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.o_proj.weight",
                   "but not model.layers.0.self_attn.k_proj.weight, model.layers.0.self_attn.v_proj.weight",
                   "'model.layers.0.self_attn'"});
}

TEST(SpmdErrors, MlpSplitsTogether) {
  expect_contains(error_with_rules("transformer.h.*.mlp.c_fc.weight: [model, null]\n"
                                   "transformer.h.*.mlp.c_fc.bias: [model]\n"),
                  {"transformer.h.0.mlp.c_fc.weight", "but not transformer.h.0.mlp.c_proj.weight",
                   "'transformer.h.0.mlp'"});
}

// One key/value head cannot go half to each of 2 ranks.
TEST(SpmdErrors, HeadsSplitEvenly) {
  if (fsdp_tp_mesh()[1] == 1) GTEST_SKIP() << "one rank along `model`: nothing is split";
  auto c = models::LlamaConfig::tiny();
  c.vocab_size = 512;
  c.num_key_value_heads = 1;
  expect_contains(error_with_rules("", std::make_shared<models::Llama>(c, 0), "llama-fsdp-tp.yaml"),
                  {"model.layers.0.self_attn.k_proj.weight holds 1 attention heads", "2 ranks of `model`"});
}

TEST(SpmdErrors, OutputRuleOffTheBatch) {
  expect_contains(error_with_rules("transformer.h.*: [null, fsdp, null]\n"),
                  {"transformer.h.*", "GPT2Block 'transformer.h.0'", "dim 0 (the batch) over fsdp"});
}

// A module output rule needs one entry per dimension of the output, which is known at the call.
TEST(SpmdErrors, OutputRuleOfAnotherRank) {
  const auto dir = fresh_dir("spmd_errors");
  const std::string path = (dir / "rules.yaml").string();
  std::ofstream(path) << "transformer.h.*: [fsdp, null]\n";
  Config config = spmd_config("gpt2", fsdp_tp_mesh());
  config.dist.spmd.sharding_rules = path;
  auto [sharded, loader] = accelerate(make_model("gpt2"), any_loader(), config);
  expect_contains(error_of([&, &sharded = sharded, &loader = loader] { sharded->forward(*loader.begin()); }),
                  {"transformer.h.*: [fsdp, null] for the output of GPT2Block 'transformer.h.0' has 2 entries",
                   "one mesh axis or null per dimension"});
}

// acc's modules return one tensor: [0] is it (as a Mixtral config's `model.layers.*[0]` names
// the hidden states of a tuple), [1] is an error.
TEST(SpmdErrors, TupleElementOnAModule) {
  expect_contains(error_with_rules("transformer.h.*[1]: [fsdp, null, null]\n"),
                  {"transformer.h.*[1]", "element 1", "one tensor", "[0] is that tensor"});
  EXPECT_EQ(error_with_rules("transformer.h.*[0]: [fsdp, null, null]\n"), "no error");
  // [0] is checked as the output itself: off the batch it is the same error.
  expect_contains(error_with_rules("transformer.h.*[0]: [null, fsdp, null]\n"),
                  {"transformer.h.*[0]", "dim 0 (the batch) over fsdp"});
}

}  // namespace
}  // namespace acc::test
