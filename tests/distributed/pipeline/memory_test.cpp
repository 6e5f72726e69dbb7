// Peak activation memory on each stage follows the schedule's microbatches in flight: GPipe
// holds every microbatch's activations at once, 1F1B at most p - s on stage s of p (within 10%
// of that prediction), and with activation checkpointing a stage holds only each microbatch's
// input plus one microbatch's forward and backward at a time. The gradients summed over the
// microbatches are counted as gradients, not activations.
#include <gtest/gtest.h>

#include <algorithm>

#include "../fsdp/fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

// Peak activation bytes of a training step on this rank, microbatches of one row each.
int64_t activation_peak(Config config, int microbatches) {
  auto& section = config.section("pipeline_config");
  section.set("microbatches", std::to_string(microbatches));
  const auto loader = data::DataLoader(make_dataset("gpt2", 2 * microbatches), {.batch_size = microbatches, .prefetch = 0});
  return measure_step([&] { return make_strategy(config)->wrap(make_model("gpt2_deep")); }, loader, 2).activations;
}

TEST(PipelineMemory, ActivationsFollowTheMicrobatchesInFlight) {
  constexpr int m = 8;
  const int p = world().size(), s = world().rank();
  // What one microbatch's activations hold on this stage, from GPipe at 8 and 4 microbatches
  // (the same one-row microbatches, so the same per-microbatch bytes and transients).
  const int64_t gpipe = activation_peak(pipeline_config("GPipe"), m);
  const int64_t per_microbatch = (gpipe - activation_peak(pipeline_config("GPipe"), m / 2)) / (m / 2);
  ASSERT_GT(per_microbatch, 0);
  // 1F1B: the same peak less the microbatches it does not hold.
  const int in_flight = std::min(p - s, m);
  const int64_t one_f_one_b = activation_peak(pipeline_config("1F1B"), m);
  expect_within(one_f_one_b, gpipe - (m - in_flight) * per_microbatch, 0.1,
                "1F1B's peak with " + std::to_string(in_flight) + " microbatches in flight");
  // Checkpointing GPipe: one microbatch's activations at a time, besides the inputs it keeps
  // and the outputs whose sends the next stage has not taken yet (each one row x 16 tokens x 64
  // wide, f32: how many depends on timing).
  Config checkpointed = pipeline_config("GPipe");
  checkpointed.section("pipeline_config").set("activation_checkpointing", "true");
  const int64_t recomputed = activation_peak(checkpointed, m);
  std::printf("stage %d of %d: GPipe %lld, per microbatch %lld, 1F1B %lld, GPipe checkpointed %lld\n", s, p,
              static_cast<long long>(gpipe), static_cast<long long>(per_microbatch), static_cast<long long>(one_f_one_b),
              static_cast<long long>(recomputed));
  constexpr int64_t kBetweenStages = 16 * 64 * 4;
  EXPECT_LT(recomputed, gpipe - (m - 1) * per_microbatch + 2 * m * kBetweenStages);
}

}  // namespace
}  // namespace acc::test
