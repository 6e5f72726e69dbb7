// Layers whose outputs the rules split over `model`, on the sequence (sequence parallelism) or
// on the hidden dim: a sequence that splits unevenly, and one shorter than the axis, train as
// one process; each rank saves only its share of the residual stream; q, k and v share their
// collectives; rules the engine cannot run are errors naming the rule and the module. The even
// cases of both splits run in equivalence_test.cpp (layouts fsdp_tp_sp*, fsdp_tp_hidden*).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "acc/memory/allocator.h"
#include "acc/ops/ops.h"
#include "acc/util/profiler.h"
#include "spmd_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

// 15 tokens: rank 0 of `model` holds 8, rank 1 holds 7. One token (as when generating a token
// at a time): rank 1 holds none.
class SequenceLength : public ::testing::TestWithParam<int64_t> {};

TEST_P(SequenceLength, TrainsAsOneProcess) {
  constexpr int64_t kSteps = 3, kGlobalBatch = 8;
  const Config config = spmd_config("llama", fsdp_tp_mesh(), "llama-fsdp-tp-sp.yaml");
  const RunResult sp = run_accelerated("llama", config, kSteps, kGlobalBatch, GetParam());
  const RunResult single = run_single_process("llama", kSteps, kGlobalBatch, GetParam());
  // The bounds of equivalence_test.cpp's tensor-parallel cases.
  EXPECT_TRUE(all_close(sp.losses, single.losses, 1e-5f, 0.f));
  EXPECT_TRUE(all_close(sp.norms, single.norms, 1e-5f, 0.f)) << "gradient norms";
  ASSERT_EQ(sp.params.size(), single.params.size());
  for (size_t i = 0; i < single.params.size(); ++i)
    EXPECT_TRUE(all_close(sp.params[i].second, single.params[i].second, 1e-5f, 5e-5f)) << single.params[i].first;
}

INSTANTIATE_TEST_SUITE_P(SequenceParallel, SequenceLength, ::testing::Values(15, 1),
                         [](const auto& info) { return std::to_string(info.param) + "_tokens"; });

// Llama tiny (4 layers of width 128) at 128-token windows, a global batch of 4 per fsdp rank
// pair: one step's activation peak per rank under `rules` on the tensor-parallel mesh, and the
// tokens of this rank's batch.
struct Peak {
  int64_t bytes = 0, tokens = 0;
};
Peak activation_peak(const std::string& rules) {
  auto c = models::LlamaConfig::tiny();
  c.vocab_size = 512;  // keep the head's share small: it is not in the split layers
  data::DataLoader loader(make_token_dataset(4 * world().size(), 512, 128), {.batch_size = 4, .prefetch = 0});
  auto [sharded, rank_loader] =
      accelerate(std::make_shared<models::Llama>(c, 0), loader, spmd_config("llama", fsdp_tp_mesh(), rules));
  memory::reset_peaks();
  const int64_t before = memory::report()[memory::Category::activations].current;
  Peak peak;
  for (auto& batch : rank_loader) {
    sharded->forward(batch).loss.backward();
    peak.tokens = batch["input_ids"].numel();
  }
  peak.bytes = memory::report()[memory::Category::activations].peak - before;
  return peak;
}

// Tensor parallelism saves four tensors of the residual stream's size per layer whole on every
// rank: each RMSNorm's input, and the normed input of the column-parallel projections after it
// (q, k, v; gate, up). With the sequence or the hidden dim split each rank saves its share of
// the four. The rest (attention, the MLP's hidden units) is split over `model` already.
class SplitResidual : public ::testing::TestWithParam<std::string> {};

TEST_P(SplitResidual, SavesItsShareOfTheResidualStream) {
  const int model = fsdp_tp_mesh()[1];
  if (model == 1) GTEST_SKIP() << "one rank along `model`: nothing is split";
  const Peak tp = activation_peak("llama-fsdp-tp.yaml"), split = activation_peak(GetParam());
  const double layers = 4, width = 128;
  const double expected = layers * 4 * static_cast<double>(tp.tokens) * width * 4 * (1.0 - 1.0 / model);
  const double saved = static_cast<double>(tp.bytes - split.bytes);
  std::printf("activation peak per rank: %.2f MB tensor parallel, %.2f MB with %s (%.2fx): %.2f MB less, the "
              "four tensors' share %.2f MB\n", tp.bytes / 1e6, split.bytes / 1e6, GetParam().c_str(),
              static_cast<double>(split.bytes) / static_cast<double>(tp.bytes), saved / 1e6, expected / 1e6);
  EXPECT_GE(saved, 0.9 * expected);
}

INSTANTIATE_TEST_SUITE_P(SplitLayers, SplitResidual,
                         ::testing::Values("llama-fsdp-tp-sp.yaml", "llama-fsdp-tp-hidden.yaml"),
                         [](const auto& info) { return info.param.find("hidden") != std::string::npos ? "hidden" : "sequence"; });

// q, k and v read one normed tensor, gate and up another: per layer and step, two gathers in
// forward, two in backward, and two reduce-scatters of the input gradients, not one per Linear.
class SharedGather : public ::testing::TestWithParam<std::string> {};

TEST_P(SharedGather, OnceForTheLinearsReadingOneTensor) {
  if (fsdp_tp_mesh()[1] == 1) GTEST_SKIP() << "one rank along `model`: nothing is split";
  data::DataLoader loader(make_dataset("llama", 4 * world().size()), {.batch_size = 4, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(make_model("llama"), loader, spmd_config("llama", fsdp_tp_mesh(), GetParam()));
  profiler::reset();
  profiler::enable(true);
  int64_t steps = 0;
  for (auto& batch : rank_loader) {
    sharded->forward(batch).loss.backward();
    ++steps;
  }
  profiler::enable(false);
  std::map<std::string, int64_t> calls;
  for (const auto& e : profiler::snapshot()) calls[e.name] = e.calls;
  const int64_t layers = 2;  // make_model's
  ASSERT_GT(steps, 0);
  EXPECT_EQ(calls["split_layers.gather_input"], steps * layers * 4);
  EXPECT_EQ(calls["split_layers.reduce_scatter_input_grad"], steps * layers * 2);
}

INSTANTIATE_TEST_SUITE_P(SplitLayers, SharedGather,
                         ::testing::Values("llama-fsdp-tp-sp.yaml", "llama-fsdp-tp-hidden.yaml"),
                         [](const auto& info) { return info.param.find("hidden") != std::string::npos ? "hidden" : "sequence"; });

// The error of accelerating GPT-2 under `rules` (a rules file's text), followed by the shipped
// rules file `then` when given, on the fsdp x tp mesh.
std::string error_with_rules(const std::string& rules, const std::string& then = "") {
  const auto dir = fresh_dir("split_layers_errors");
  const std::string path = (dir / "rules.yaml").string();
  std::ofstream out(path);
  out << rules;
  if (!then.empty()) out << std::ifstream(rules_path(then)).rdbuf();
  out.close();
  Config config = spmd_config("gpt2", fsdp_tp_mesh());
  config.dist.spmd.sharding_rules = path;
  data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 4});
  return error_of([&] { accelerate(make_model("gpt2"), loader, config); });
}

// Attention mixes tokens: with the sequence split, it must run between the column-parallel
// gather and the row-parallel reduce-scatter.
TEST(SequenceParallel, EveryLinearInASplitLayerMustBeSplitOverModel) {
  expect_contains(error_with_rules("transformer.h.*: [fsdp, model, null]\n"),
                  {"transformer.h.*", "Linear 'transformer.h.0.attn.c_attn'", "column- or row-parallel"});
}

TEST(SequenceParallel, OnlyLayersOfAStack) {
  expect_contains(error_with_rules("transformer.ln_f: [fsdp, model, null]\n"),
                  {"transformer.ln_f", "a run of consecutive layers of one stack"});
}

// Inside layers whose sequence is split, a module rule says whether its output holds this rank's
// tokens (a norm, a row-parallel Linear) or every token (a column-parallel Linear); a rule that
// says otherwise is an error at the call, naming the rule and the module.
TEST(SequenceParallel, RulesInsideTheLayersSayWhatRuns) {
  if (fsdp_tp_mesh()[1] == 1) GTEST_SKIP() << "one rank along `model`: nothing is split";
  auto forward_error = [](const std::string& rules) {
    const auto dir = fresh_dir("split_layers_errors");
    const std::string path = (dir / "rules.yaml").string();
    std::ofstream out(path);
    out << rules << std::ifstream(rules_path("llama-fsdp-tp-sp.yaml")).rdbuf();
    out.close();
    Config config = spmd_config("llama", fsdp_tp_mesh());
    config.dist.spmd.sharding_rules = path;
    data::DataLoader loader(make_dataset("llama", 4 * world().size()), {.batch_size = 4, .prefetch = 0});
    auto [sharded, rank_loader] = accelerate(make_model("llama"), loader, config);
    return error_of([&, &sharded = sharded, &rank_loader = rank_loader] {
      sharded->forward(*rank_loader.begin()).loss.backward();
    });
  };
  expect_contains(forward_error("model.layers.*.input_layernorm: [fsdp, null, null]\n"),
                  {"model.layers.*.input_layernorm", "RMSNorm 'model.layers.0.input_layernorm'",
                   "holds this rank's tokens: [fsdp, model, ...]"});
  expect_contains(forward_error("model.layers.*.self_attn.q_proj: [fsdp, model, null]\n"),
                  {"model.layers.*.self_attn.q_proj", "Linear 'model.layers.0.self_attn.q_proj'",
                   "holds every token: [fsdp, null, ...]"});
  EXPECT_EQ(forward_error("model.layers.*.input_layernorm: [fsdp, model, null]\n"
                          "model.layers.*.self_attn.q_proj: [fsdp, null, model]\n"
                          "model.layers.*.self_attn.o_proj: [fsdp, model, null]\n"),
            "no error");
}

// A stack of one layer and a head: enough for the rules to be checked at wrap time.
class OneLayerStack final : public models::Model {
 public:
  explicit OneLayerStack(std::shared_ptr<nn::Module> layer) : Model("OneLayerStack") {
    register_module("layers", std::make_shared<nn::ModuleList>())->append(std::move(layer));
    register_module("head", std::make_shared<nn::Linear>(8, 8));
  }
  models::ModelOutput forward(const data::Batch&) override { return {}; }
  double train_flops_per_token(int64_t) const override { return 0; }
};

std::string error_with_layer(std::shared_ptr<nn::Module> layer, const std::string& rules) {
  const auto dir = fresh_dir("split_layers_errors");
  const std::string path = (dir / "rules.yaml").string();
  std::ofstream(path) << rules;
  Config config = spmd_config("mlp", fsdp_tp_mesh());
  config.dist.spmd.sharding_rules = path;
  data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 4});
  return error_of([&] { accelerate(std::make_shared<OneLayerStack>(std::move(layer)), loader, config); });
}

TEST(SequenceParallel, DropoutInASplitLayerIsAnError) {
  expect_contains(error_with_layer(std::make_shared<nn::Dropout>(0.1), "layers.*: [fsdp, model, null]\n"),
                  {"layers.*", "Dropout 'layers.0'", "p = 0.1", "same mask"});
}

// A layer scaling each feature by its own parameter: whole over `model`, it is neither a norm
// nor a Linear, and with the hidden dim split the engine cannot know how it uses the features.
class FeatureScale final : public nn::Module {
 public:
  FeatureScale() : Module("FeatureScale") { register_parameter("scale", nn::new_parameter({8})); }
  Tensor forward(const Tensor& x) override { return ops::mul(x, param("scale")); }
};

TEST(HiddenSplit, OnlyNormsHoldWholeParametersInASplitLayer) {
  expect_contains(error_with_layer(std::make_shared<FeatureScale>(), "layers.*: [fsdp, null, model]\n"),
                  {"layers.*", "the hidden dim (the last)", "FeatureScale 'layers.0'", "LayerNorm and RMSNorm"});
  // With the sequence split it runs on this rank's tokens, whole.
  EXPECT_EQ(error_with_layer(std::make_shared<FeatureScale>(), "layers.*: [fsdp, model, null]\n"), "no error");
}

TEST(HiddenSplit, EveryLinearInASplitLayerMustBeSplitOverModel) {
  expect_contains(error_with_rules("transformer.h.*: [fsdp, null, model]\n"),
                  {"transformer.h.*", "the hidden dim (the last)", "Linear 'transformer.h.0.attn.c_attn'",
                   "column- or row-parallel"});
}

TEST(HiddenSplit, OneSplitDimForTheLayers) {
  expect_contains(error_with_rules("transformer.h.0: [fsdp, model, null]\ntransformer.h.1: [fsdp, null, model]\n",
                                   "gpt2-fsdp-tp.yaml"),
                  {"transformer.h.0", "transformer.h.1", "share one split dim"});
}

// Inside layers split on the hidden dim every module's output is split so; a rule saying
// otherwise would not be what runs.
TEST(HiddenSplit, RulesInsideTheLayersSplitTheLastDim) {
  if (fsdp_tp_mesh()[1] == 1) GTEST_SKIP() << "one rank along `model`: nothing is split";
  expect_contains(error_with_rules("transformer.h.*.mlp: [fsdp, null, null]\n", "gpt2-fsdp-tp-hidden.yaml"),
                  {"transformer.h.*.mlp", "GPT2MLP 'transformer.h.0.mlp'", "must split the last dim over `model`"});
  EXPECT_EQ(error_with_rules("transformer.h.*.mlp: [fsdp, null, model]\n", "gpt2-fsdp-tp-hidden.yaml"), "no error");
}

TEST(SequenceParallel, OtherMiddleDimsAreErrors) {
  expect_contains(error_with_rules("transformer.h.*: [fsdp, null, model, null]\n"),
                  {"transformer.h.*", "only the sequence (dim 1) or the last dim"});
}

}  // namespace
}  // namespace acc::test
