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

// Time another thread spent beside the marked ops is listed, but is no share of their total.
TEST(Profiler, AlongsideTimeIsListedWithoutAShare) {
  profiler::reset();
  profiler::add("ops", 0.3);
  profiler::add("ops", 0.1);
  profiler::add("comm.collective", 0.8, /*alongside=*/true);
  const std::string table = profiler::report();
  EXPECT_NE(table.find("ops                                 400.0 ms    100.0%        2 calls"), std::string::npos) << table;
  EXPECT_NE(table.find("comm.collective                     800.0 ms alongside        1 calls"), std::string::npos) << table;
  profiler::reset();
}

}  // namespace
}  // namespace acc
