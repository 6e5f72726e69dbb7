// Gradient accumulation under SPMD: micro-batches inside no_sync() sum their gradients on each
// rank and the first backward after it reduces the sum, over the fsdp axis, with tensor
// parallelism on the model axis.
#include <gtest/gtest.h>

#include "spmd_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

// The gradient norm after one global batch of 8 in micro-batches of `micro` (8 / micro
// backward passes, all but the last inside no_sync()).
double norm_after(int64_t micro) {
  data::DataLoader loader(make_dataset("llama", 8), {.batch_size = micro, .prefetch = 0});
  auto [sharded, rank_loader] =
      accelerate(make_model("llama"), loader, fsdp_tp_config("llama"));
  const int64_t passes = 8 / micro;
  int64_t pass = 0;
  for (auto& batch : rank_loader) {
    if (++pass < passes) {
      auto guard = sharded->no_sync();
      sharded->forward(batch).loss.backward();
    } else {
      sharded->forward(batch).loss.backward();
      break;
    }
  }
  return sharded->clip_grad_norm(1e9);
}

TEST(SpmdAccumulation, NoSyncMicroBatchesSumToTheWholeBatch) {
  // Two micro-batches of 4 sum two means over 4 samples: twice the mean over all 8.
  const double whole = norm_after(8), accumulated = norm_after(4);
  EXPECT_NEAR(accumulated, 2 * whole, 1e-5 * whole);
  EXPECT_GT(whole, 0);
}

}  // namespace
}  // namespace acc::test
