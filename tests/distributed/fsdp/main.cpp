// test_fsdp runs on every rank (under mpirun at 2 and 4 ranks, and alone): acc::init joins the
// world, then each rank runs the same tests in the same order, so their collectives match up.
#include <gtest/gtest.h>

#include "acc/runtime/init.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  acc::init(argc, argv);
  const int result = RUN_ALL_TESTS();
  acc::shutdown();
  return result;
}
