// A rank whose rows are all ignored (labels -100: padding only, say) still takes part in every
// gradient reduction: the loss sends zero gradients instead of none, so its peers never wait for
// reductions it would not issue.
#include <gtest/gtest.h>

#include <cmath>

#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

TEST(IgnoredRows, ARankWithOnlyIgnoredLabelsStillReduces) {
  if (world().size() == 1) GTEST_SKIP() << "needs peers";
  for (const std::string kind : {"llama", "gpt2"}) {  // Llama's head is not tied: only the loss reaches it
    data::DataLoader loader(make_dataset(kind, 8), {.batch_size = 8, .prefetch = 0});
    auto [sharded, rank_loader] = accelerate(make_model(kind), loader, strategy_config("FULL_SHARD", kind));
    optim::AdamW opt(sharded->param_groups(kWeightDecay), kAdam);
    for (auto& batch : rank_loader) {
      data::Batch b = batch;
      if (world().rank() == world().size() - 1) {
        Tensor ignored = b["labels"].clone();
        ignored.fill_(-100.0);
        b.set("labels", ignored);
      }
      opt.zero_grad();
      auto out = sharded->forward(b);
      if (world().rank() == world().size() - 1) {
        EXPECT_EQ(out.loss.item(), 0.f) << kind;
      }
      out.loss.backward();
      EXPECT_TRUE(std::isfinite(sharded->clip_grad_norm(kMaxNorm))) << kind;
      opt.step();
    }
  }
}

}  // namespace
}  // namespace acc::test
