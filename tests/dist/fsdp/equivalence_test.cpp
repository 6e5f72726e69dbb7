// Every FSDP setting, f32 and bf16, on the MLP, GPT-2 and Llama: k AdamW steps with clipping
// through acc::accelerate on N ranks give the losses and parameters of one process training
// on the same global batches.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

constexpr int64_t kSteps = 3, kGlobalBatch = 8;

// f32: the sharded run differs from the single process only in the order of additions (each
// rank's mean over its slice, averaged in the reduce-scatter; the norm summed per shard), a
// relative 1e-7 per step. Adam divides by sqrt(v), which amplifies it where a gradient is
// near zero; over 3 steps of lr 1e-3 the parameters stay within 1e-5 relative + 2e-6.
constexpr float kLossRtolF32 = 1e-5f, kParamRtolF32 = 1e-5f, kParamAtolF32 = 2e-6f;
// bf16: compared with one process through the same mechanism (mixed precision is the
// strategy's), the runs again differ only in the order of f32 additions (observed: 4e-7 of the
// loss). But a weight rounded to bf16 after a step can then land on the other side of a
// rounding boundary (one bf16 ulp of a 0.01 weight is 6e-5), and Adam moves a weight whose
// gradient is near zero by up to lr per step either way: parameters within 5e-4 (observed
// 1e-4); gradients, being differences of nearby values, feel it more than losses do (norms
// observed within 1.4e-5). Against the f32 run the losses stay within 2% (bf16 trains like f32).
constexpr float kLossRtolBf16 = 1e-5f, kNormRtolBf16 = 1e-4f, kParamAtolBf16 = 5e-4f,
                kLossRtolBf16VsF32 = 2e-2f;

using Case = std::tuple<std::string, std::string, bool>;  // strategy, model, bf16

class Equivalence : public ::testing::TestWithParam<Case> {};

TEST_P(Equivalence, SameLossesAndParametersAsOneProcess) {
  const auto& [strategy, kind, bf16] = GetParam();
  const Config config = strategy_config(strategy, kind, bf16);
  const RunResult sharded = run_accelerated(kind, config, kSteps, kGlobalBatch);
  const RunResult single = bf16 ? run_one_rank(kind, config, kSteps, kGlobalBatch)
                                : run_single_process(kind, kSteps, kGlobalBatch);

  ASSERT_EQ(sharded.losses.size(), static_cast<size_t>(kSteps));
  const float loss_rtol = bf16 ? kLossRtolBf16 : kLossRtolF32;
  EXPECT_TRUE(all_close(sharded.losses, single.losses, loss_rtol, 0.f));
  EXPECT_TRUE(all_close(sharded.norms, single.norms, bf16 ? kNormRtolBf16 : kLossRtolF32, 0.f))
      << "gradient norms";
  ASSERT_EQ(sharded.params.size(), single.params.size());
  for (size_t i = 0; i < single.params.size(); ++i) {
    ASSERT_EQ(sharded.params[i].first, single.params[i].first);
    EXPECT_TRUE(all_close(sharded.params[i].second, single.params[i].second,
                          bf16 ? 0.f : kParamRtolF32, bf16 ? kParamAtolBf16 : kParamAtolF32))
        << single.params[i].first;
  }
  if (bf16) {
    EXPECT_TRUE(all_close(sharded.losses, run_single_process(kind, kSteps, kGlobalBatch).losses,
                          kLossRtolBf16VsF32, 0.f));
  }
  // The runs really trained: parameters moved from their initial values.
  const auto initial = make_model(kind)->named_parameters();
  float moved = 0;
  for (size_t i = 0; i < initial.size(); ++i) {
    const auto v = initial[i].second.to_vector();
    for (size_t j = 0; j < v.size(); ++j)
      moved = std::max(moved, std::abs(v[j] - single.params[i].second[j]));
  }
  EXPECT_GT(moved, 5e-4f);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::get<0>(info.param) + "_" + std::get<1>(info.param) +
         (std::get<2>(info.param) ? "_bf16" : "_f32");
}

INSTANTIATE_TEST_SUITE_P(
    Fsdp, Equivalence,
    ::testing::Combine(::testing::Values("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD",
                                         "HYBRID_SHARD_ZERO2"),
                       ::testing::Values("mlp", "gpt2", "llama"), ::testing::Bool()),
    case_name);

}  // namespace
}  // namespace acc::test
