#include <gtest/gtest.h>

#include <new>

#include "acc/train/cli.h"
#include "acc/util/error.h"

namespace acc::train {
namespace {

TEST(RunProgram, ErrorBecomesOneLineAndExitCodeOne) {
  testing::internal::CaptureStderr();
  const int code = run_program("prog", []() -> int { ACC_FAIL("missing file data/x.bin"); });
  EXPECT_EQ(code, 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "prog: error: missing file data/x.bin\n");
}

TEST(RunProgram, ARefusedAllocationSaysOutOfMemory) {
  testing::internal::CaptureStderr();
  const int code = run_program("prog", []() -> int { throw std::bad_alloc(); });
  EXPECT_EQ(code, 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "prog: error: out of memory: std::bad_alloc\n");
  // A length that cannot be is a size bug, not memory running out.
  testing::internal::CaptureStderr();
  run_program("prog", []() -> int { throw std::bad_array_new_length(); });
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "prog: error: std::bad_array_new_length\n");
}

TEST(RunProgram, PassesTheBodysExitCodeThrough) {
  EXPECT_EQ(run_program("prog", [] { return 0; }), 0);
  EXPECT_EQ(run_program("prog", [] { return 3; }), 3);
}

}  // namespace
}  // namespace acc::train
