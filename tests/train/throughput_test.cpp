// ThroughputMeter counts the training steps' own time only: what happens between steps
// (evaluation, checkpoint saves) must not lower tokens/s.
#include <gtest/gtest.h>

#include <chrono>

#include "acc/train/throughput.h"

namespace acc::train {
namespace {

// Keeps this thread busy for `ms` milliseconds: time that passes outside any step.
void busy_for(int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
  }
}

TEST(ThroughputMeter, CountsOnlyTheTimeInsideSteps) {
  ThroughputMeter meter(6.0, 0.0);
  EXPECT_EQ(meter.tokens_per_second(), 0.0);
  for (int i = 0; i < 3; ++i) {
    meter.begin_step();
    meter.step(1000);
    busy_for(20);  // an evaluation between steps
  }
  EXPECT_EQ(meter.steps(), 3);
  // 3000 tokens in microseconds of step time; counting the 60 ms outside would give <= 50000/s.
  EXPECT_GT(meter.tokens_per_second(), 1e6);
  meter.reset();
  EXPECT_EQ(meter.steps(), 0);
  EXPECT_EQ(meter.tokens_per_second(), 0.0);
  meter.begin_step();
  busy_for(20);  // a step that takes 20 ms
  meter.step(1000);
  EXPECT_LT(meter.tokens_per_second(), 1000 / 0.02 * 1.001);
  EXPECT_GT(meter.tokens_per_second(), 1000 / 0.5);
}

}  // namespace
}  // namespace acc::train
