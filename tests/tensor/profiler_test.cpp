#include <gtest/gtest.h>

#include <thread>

#include "acc/util/profiler.h"

namespace acc {
namespace {

void marked_work(int ms) {
  ACC_PROFILE("work");
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

TEST(Profiler, CountsOnlyWhenEnabledAndOnlyOutermostScopes) {
  profiler::reset();
  marked_work(1);
  EXPECT_TRUE(profiler::snapshot().empty());

  profiler::enable(true);
  {
    ACC_PROFILE("outer");
    marked_work(5);  // nested inside "outer": not counted separately
  }
  marked_work(5);
  profiler::enable(false);

  auto entries = profiler::snapshot();
  ASSERT_EQ(entries.size(), 2u);
  for (const auto& e : entries) {
    EXPECT_EQ(e.calls, 1) << e.name;
    EXPECT_GE(e.seconds, 0.004) << e.name;
  }
  profiler::reset();
}

}  // namespace
}  // namespace acc
