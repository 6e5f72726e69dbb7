// Specs the SPMD engine cannot run are one clear error naming the module and the spec.
#include <gtest/gtest.h>

#include <fstream>

#include "spmd_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

data::DataLoader any_loader() { return data::DataLoader(make_dataset("gpt2", 8), {.batch_size = 4}); }

// The error of accelerating GPT-2 under `rules` (a rules file's text) on the fsdp x tp mesh.
std::string error_with_rules(const std::string& rules) {
  const auto dir = fresh_dir("spmd_errors");
  const std::string path = (dir / "rules.yaml").string();
  std::ofstream(path) << rules;
  Config config = spmd_config("gpt2", fsdp_tp_mesh());
  config.dist.spmd.sharding_rules = path;
  return error_of([&] { accelerate(make_model("gpt2"), any_loader(), config); });
}

void expect_contains(const std::string& error, const std::vector<std::string>& parts) {
  for (const auto& part : parts) EXPECT_NE(error.find(part), std::string::npos) << error;
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

// An embedding splits over `model` by rows (the vocabulary), not by its width.
TEST(SpmdErrors, EmbeddingWidthSplitOverModelNamesTheModule) {
  expect_contains(error_with_rules("transformer.wpe.weight: [null, model]\n"),
                  {"Embedding 'transformer.wpe'", "[null, model]", "an Embedding's over its rows"});
}

TEST(SpmdErrors, ColumnParallelLinearNeedsItsBiasSplit) {
  expect_contains(error_with_rules("transformer.h.*.mlp.c_fc.weight: [model, null]\n"),
                  {"Linear 'transformer.h.0.mlp.c_fc'", "bias"});
}

TEST(SpmdErrors, OutputRuleOffTheBatch) {
  expect_contains(error_with_rules("transformer.h.*: [null, fsdp, null]\n"),
                  {"transformer.h.*", "GPT2Block 'transformer.h.0'", "dim 0 (the batch) over fsdp"});
}

TEST(SpmdErrors, TupleElementOnAModule) {
  expect_contains(error_with_rules("transformer.h.*[0]: [fsdp, null, null]\n"),
                  {"transformer.h.*[0]", "one tensor"});
}

}  // namespace
}  // namespace acc::test
