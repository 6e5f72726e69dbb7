// Sequence parallelism (output rules splitting the layers' sequence over `model`): a sequence
// that splits unevenly, and one shorter than the axis, train as one process; each rank saves only
// its slice of the residual stream; q, k and v share their collectives; rules it cannot run
// are errors naming the rule and the module. The even cases run in equivalence_test.cpp
// (layouts fsdp_tp_sp*).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "acc/memory/allocator.h"
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
// (q, k, v; gate, up). With the sequence split each rank saves its slice of the four. The rest
// (attention, the MLP's hidden units) is split over `model` already.
TEST(SequenceParallel, SavesItsSliceOfTheResidualStream) {
  const int model = fsdp_tp_mesh()[1];
  if (model == 1) GTEST_SKIP() << "one rank along `model`: nothing is split";
  const Peak tp = activation_peak("llama-fsdp-tp.yaml"), sp = activation_peak("llama-fsdp-tp-sp.yaml");
  const double layers = 4, width = 128;
  const double expected = layers * 4 * static_cast<double>(tp.tokens) * width * 4 * (1.0 - 1.0 / model);
  const double saved = static_cast<double>(tp.bytes - sp.bytes);
  std::printf("activation peak per rank: %.2f MB tensor parallel, %.2f MB with the sequence split "
              "(%.2fx): %.2f MB less, the four tensors' share %.2f MB\n", tp.bytes / 1e6, sp.bytes / 1e6,
              static_cast<double>(sp.bytes) / static_cast<double>(tp.bytes), saved / 1e6, expected / 1e6);
  EXPECT_GE(saved, 0.9 * expected);
}

// q, k and v read one normed tensor, gate and up another: per layer and step, two gathers in
// forward, two in backward, and two reduce-scatters of the input gradients, not one per Linear.
TEST(SequenceParallel, GathersOnceForTheLinearsReadingOneTensor) {
  if (fsdp_tp_mesh()[1] == 1) GTEST_SKIP() << "one rank along `model`: nothing is split";
  data::DataLoader loader(make_dataset("llama", 4 * world().size()), {.batch_size = 4, .prefetch = 0});
  auto [sharded, rank_loader] =
      accelerate(make_model("llama"), loader, spmd_config("llama", fsdp_tp_mesh(), "llama-fsdp-tp-sp.yaml"));
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
  EXPECT_EQ(calls["sequence_parallel.gather_input"], steps * layers * 4);
  EXPECT_EQ(calls["sequence_parallel.reduce_scatter_input_grad"], steps * layers * 2);
}

// The error of accelerating GPT-2 under `rules` (a rules file's text) on the fsdp x tp mesh.
std::string error_with_rules(const std::string& rules) {
  const auto dir = fresh_dir("sequence_parallel_errors");
  const std::string path = (dir / "rules.yaml").string();
  std::ofstream(path) << rules;
  Config config = spmd_config("gpt2", fsdp_tp_mesh());
  config.dist.spmd.sharding_rules = path;
  data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 4});
  return error_of([&] { accelerate(make_model("gpt2"), loader, config); });
}

void expect_contains(const std::string& error, const std::vector<std::string>& parts) {
  for (const auto& part : parts) EXPECT_NE(error.find(part), std::string::npos) << error;
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

// A stack of dropout layers and a head: enough for the rules to be checked at wrap time.
class DropoutStack final : public models::Model {
 public:
  DropoutStack() : Model("DropoutStack") {
    auto layers = register_module("layers", std::make_shared<nn::ModuleList>());
    layers->append(std::make_shared<nn::Dropout>(0.1));
    register_module("head", std::make_shared<nn::Linear>(8, 8));
  }
  models::ModelOutput forward(const data::Batch&) override { return {}; }
  double train_flops_per_token(int64_t) const override { return 0; }
};

TEST(SequenceParallel, DropoutInASplitLayerIsAnError) {
  const auto dir = fresh_dir("sequence_parallel_errors");
  const std::string path = (dir / "rules.yaml").string();
  std::ofstream(path) << "layers.*: [fsdp, model, null]\n";
  Config config = spmd_config("mlp", fsdp_tp_mesh());
  config.dist.spmd.sharding_rules = path;
  data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 4});
  expect_contains(error_of([&] { accelerate(std::make_shared<DropoutStack>(), loader, config); }),
                  {"layers.*", "Dropout 'layers.0'", "p = 0.1", "same mask"});
}

TEST(SequenceParallel, OtherMiddleDimsAreErrors) {
  expect_contains(error_with_rules("transformer.h.*: [fsdp, null, model, null]\n"),
                  {"transformer.h.*", "only the sequence (dim 1) or the last dim"});
}

}  // namespace
}  // namespace acc::test
