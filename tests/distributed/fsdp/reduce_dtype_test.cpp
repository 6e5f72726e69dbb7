// fsdp_reduce_dtype: bf16 sends gradients in bf16: each rank's gradient is rounded once
// (relative 2^-9) before the f32-accumulated sum. Training stays within a bf16 bound of one
// process; at more than one rank it is not the f32 reduction (the rounding is really there).
#include <gtest/gtest.h>

#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

TEST(ReduceDtype, Bf16GradientsTrainLikeF32) {
  for (const char* strategy : {"FULL_SHARD", "NO_SHARD", "HYBRID_SHARD"}) {
    Config config = strategy_config(strategy, "gpt2");
    const RunResult f32 = run_accelerated("gpt2", config, 3, 8);
    config.dist.fsdp.reduce_bf16 = true;
    const RunResult bf16 = run_accelerated("gpt2", config, 3, 8);
    // A gradient rounded to bf16 moves Adam's step by at most its rounding where the gradient
    // is not near zero, and by up to lr either way where it is: 3 steps of lr 1e-3.
    EXPECT_TRUE(all_close(bf16.losses, f32.losses, 1e-3f, 0.f)) << strategy;
    ASSERT_EQ(bf16.params.size(), f32.params.size());
    bool any_difference = false;
    for (size_t i = 0; i < f32.params.size(); ++i) {
      EXPECT_TRUE(all_close(bf16.params[i].second, f32.params[i].second, 0.f, 3e-3f)) << f32.params[i].first;
      any_difference = any_difference || bf16.params[i].second != f32.params[i].second;
    }
    if (world().size() > 1) {
      EXPECT_TRUE(any_difference) << strategy << ": the bf16 reduction changed nothing";
    }
  }
}

}  // namespace
}  // namespace acc::test
