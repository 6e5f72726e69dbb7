// Sharding rules files (torchprime's format): name patterns, partition specs, [i] on module
// outputs, and what a model's names resolve to, with the errors and warnings a user sees. The
// shipped files under configs/sharding must cover every parameter of the models they name.
#include <gtest/gtest.h>

#include "acc/models/gpt2.h"
#include "acc/models/llama.h"
#include "acc/spmd/sharding_rules.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

using spmd::PartitionSpec;
using spmd::ShardingRules;

const std::vector<std::string> kAxes{"fsdp", "model"};

std::vector<std::pair<std::string, Shape>> shapes_of(models::Model& model) {
  std::vector<std::pair<std::string, Shape>> out;
  for (const auto& [name, p] : model.named_parameters()) out.emplace_back(name, p.shape());
  return out;
}

std::vector<std::string> paths_of(models::Model& model) {
  std::vector<std::string> out;
  for (const auto& [path, m] : model.named_modules()) out.push_back(path);
  return out;
}

TEST(ShardingRules, WildcardsMatchWholeIntegersOnly) {
  EXPECT_TRUE(spmd::name_matches("model.layers.*.mlp", "model.layers.0.mlp"));
  EXPECT_TRUE(spmd::name_matches("model.layers.*.mlp", "model.layers.17.mlp"));
  EXPECT_TRUE(spmd::name_matches("h.*.*", "h.3.12"));
  EXPECT_FALSE(spmd::name_matches("model.layers.*.mlp", "model.layers.x.mlp"));
  EXPECT_FALSE(spmd::name_matches("model.layers.*.mlp", "model.layers..mlp"));
  EXPECT_FALSE(spmd::name_matches("model.layers.*", "model.layers.0.mlp"));  // no prefix match
  EXPECT_FALSE(spmd::name_matches("model.layers.*.mlp", "model.layers.1.mlp.up_proj"));
  EXPECT_FALSE(spmd::name_matches("lm_head", "lm_head.weight"));
  EXPECT_TRUE(spmd::name_matches("lm_head", "lm_head"));
}

TEST(ShardingRules, ParsesSpecsWithNullsListsOfAxesAndIndices) {
  const auto rules = ShardingRules::parse(R"(
model.embed_tokens.weight: [fsdp, null]
model.layers.*.mlp.up_proj.weight: [[fsdp, model], null]
model.layers.*[0]: [fsdp, null, null]
lm_head: [fsdp, null, model]
)", "<inline>");
  ASSERT_EQ(rules.rules().size(), 4u);
  EXPECT_EQ(rules.rules()[0].spec.to_string(), "[fsdp, null]");
  EXPECT_EQ(rules.rules()[1].spec.to_string(), "[[fsdp, model], null]");
  EXPECT_EQ(rules.rules()[1].spec.dims[0], (std::vector<std::string>{"fsdp", "model"}));
  EXPECT_TRUE(rules.rules()[1].spec.dims[1].empty());
  EXPECT_EQ(rules.rules()[2].pattern, "model.layers.*");
  EXPECT_EQ(rules.rules()[2].output_index, 0);
  EXPECT_EQ(rules.rules()[3].output_index, -1);
  // The first key that matches decides.
  const auto first = ShardingRules::parse("a.*.w: [fsdp]\na.1.w: [model]\n", "<inline>");
  EXPECT_EQ(first.find("a.1.w")->spec.to_string(), "[fsdp]");
}

TEST(ShardingRules, BadFilesAreErrorsNamingTheKey) {
  EXPECT_NE(error_of([] { ShardingRules::parse("w: fsdp\n", "r.yaml"); })
                .find("r.yaml, key 'w': expected a list with one entry per tensor dimension"),
            std::string::npos);
  EXPECT_NE(error_of([] { ShardingRules::parse("w: [fsdp, fsdp]\n", "r.yaml"); })
                .find("axis 'fsdp' splits more than one dimension"),
            std::string::npos);
  EXPECT_NE(error_of([] { ShardingRules::parse("layers.*[x]: [fsdp]\n", "r.yaml"); }).find("[i] with i an integer"),
            std::string::npos);
  EXPECT_NE(error_of([] { ShardingRules::parse("- a\n- b\n", "r.yaml"); }).find("expected a map"), std::string::npos);
  EXPECT_NE(error_of([] { ShardingRules::from_file("/nonexistent/rules.yaml"); })
                .find("no file '/nonexistent/rules.yaml'"),
            std::string::npos);
}

TEST(ShardingRules, ResolvesAModelsParametersAndOutputs) {
  auto model = std::make_shared<models::Llama>(models::LlamaConfig::tiny(), 0);
  const auto rules = ShardingRules::parse(R"(
model.layers.*.self_attn.q_proj.weight: [model, fsdp]
model.layers.*[0]: [fsdp, null, null]
model.layers.*[1]: [fsdp]
model.layers.*.mlp.nonexistent.weight: [fsdp, null]
)", "r.yaml");
  const auto resolved = rules.resolve(shapes_of(*model), paths_of(*model), kAxes);
  for (const auto& [name, spec] : resolved.parameters) {
    const Shape shape = model->parameter(name).shape();
    ASSERT_EQ(spec.rank(), shape.size()) << name;
    if (name.find("q_proj") != std::string::npos)
      EXPECT_EQ(spec.to_string(), "[model, fsdp]") << name;
    else
      EXPECT_TRUE(spec.axes().empty()) << name << " is named by no key and stays whole";
  }
  // Two elements of each layer's output, by their own keys.
  const auto layers = models::LlamaConfig::tiny().num_hidden_layers;
  EXPECT_EQ(static_cast<int64_t>(resolved.outputs.size()), 2 * layers);
  ASSERT_EQ(resolved.warnings.size(), 1u);
  EXPECT_NE(resolved.warnings[0].find("'model.layers.*.mlp.nonexistent.weight' matches no parameter and no module"),
            std::string::npos);
  // A file none of whose keys names anything of the model is an error, not a warning per key.
  const std::string other = error_of([&] {
    ShardingRules::parse("transformer.h.*.attn.c_attn.weight: [model, fsdp]\n", "gpt2.yaml")
        .resolve(shapes_of(*model), paths_of(*model), kAxes);
  });
  EXPECT_NE(other.find("sharding rules gpt2.yaml: none of its 1 keys matches"), std::string::npos) << other;
  EXPECT_NE(other.find("the file is written for another model"), std::string::npos) << other;
  // Without a key, the default: every parameter's first dimension over fsdp.
  const auto fallback = ShardingRules::parse("", "none").resolve(shapes_of(*model), {}, kAxes, "fsdp");
  for (const auto& [name, spec] : fallback.parameters) EXPECT_EQ(spec.dims[0], std::vector<std::string>{"fsdp"}) << name;
}

// A second name of one axis (torchprime's `tensor` for `model`) becomes that axis in every spec;
// a spec naming both would split two dims over one axis.
TEST(ShardingRules, RenameAxis) {
  auto rules = ShardingRules::parse("a: [fsdp, tensor]\nb: [[tensor, fsdp], null]\nc: [model]\n", "r.yaml");
  rules.rename_axis("tensor", "model");
  EXPECT_EQ(rules.rules()[0].spec.to_string(), "[fsdp, model]");
  EXPECT_EQ(rules.rules()[1].spec.to_string(), "[[model, fsdp], null]");
  EXPECT_EQ(rules.rules()[2].spec.to_string(), "[model]");
  auto both = ShardingRules::parse("a: [tensor, model]\n", "r.yaml");
  EXPECT_NE(error_of([&] { both.rename_axis("tensor", "model"); }).find("key 'a': spec [tensor, model] names 'tensor' "
                                                                      "and 'model', two names of one axis"),
            std::string::npos);
}

TEST(ShardingRules, SpecsThatDoNotFitAreErrors) {
  auto model = std::make_shared<models::Llama>(models::LlamaConfig::tiny(), 0);
  auto resolve = [&](const std::string& yaml) {
    ShardingRules::parse(yaml, "r.yaml").resolve(shapes_of(*model), paths_of(*model), kAxes);
  };
  EXPECT_NE(error_of([&] { resolve("model.norm.weight: [fsdp, null]\n"); })
                .find("spec [fsdp, null] has 2 entries but parameter 'model.norm.weight' has shape"),
            std::string::npos);
  EXPECT_NE(error_of([&] { resolve("model.norm.weight: [data]\n"); })
                .find("names axis 'data', which the mesh does not have (its axes: fsdp, model)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { resolve("model.norm.weight[0]: [fsdp]\n"); }).find("does not apply to a parameter"),
            std::string::npos);
}

// Every shipped file resolves against the model it is written for: no key unused, every
// parameter named, each spec as long as its parameter's rank.
TEST(ShardingRules, ShippedFilesCoverTheirModels) {
  for (const std::string family : {"gpt2", "llama"})
    for (const std::string kind : {"fsdp", "fsdp-tp", "fsdp-tp-sp", "fsdp-tp-hidden"}) {
      const std::string path = std::string(ACC_SOURCE_DIR) + "/configs/sharding/" + family + "-" + kind + ".yaml";
      SCOPED_TRACE(path);
      std::shared_ptr<models::Model> model;
      if (family == "gpt2")
        model = std::make_shared<models::GPT2>(models::GPT2Config::tiny(), 0);
      else
        model = std::make_shared<models::Llama>(models::LlamaConfig::tiny(), 0);
      const auto rules = ShardingRules::from_file(path);
      const auto resolved = rules.resolve(shapes_of(*model), paths_of(*model), kAxes);
      EXPECT_TRUE(resolved.warnings.empty()) << resolved.warnings[0];
      for (const auto& [name, spec] : resolved.parameters) {
        ASSERT_NE(rules.find(name), nullptr) << name << " is named by no key";
        EXPECT_TRUE(spec.dims[0].size() + (spec.rank() > 1 ? spec.dims[1].size() : 0) > 0) << name;
      }
      EXPECT_FALSE(resolved.outputs.empty());
    }
}

}  // namespace
}  // namespace acc::test
