// test_dist_mpi runs on every rank under mpirun: acc::init joins the world, then each rank runs
// the same tests in the same order, so their collectives match up.
#include <gtest/gtest.h>

#include "acc/memory/allocator.h"
#include "acc/runtime/init.h"

#include "segments.h"

// Exactly the world's shared-memory segments, if there are any (collectives_test.cpp).
int64_t g_communication_bytes_after_init = 0;

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  acc::init(argc, argv);
  g_communication_bytes_after_init =
      acc::memory::report()[acc::memory::Category::communication].current;
  const int result = RUN_ALL_TESTS();
  acc::shutdown();
  return result;
}
