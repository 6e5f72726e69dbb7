// Storage::release / reacquire: the bytes go back to the allocator while every view and saved
// handle keeps naming the same storage, which is how FULL_SHARD frees gathered parameters that
// autograd still references.
#include <gtest/gtest.h>

#include "acc/ops/ops.h"
#include "acc/tensor/tensor.h"

namespace acc {
namespace {

using memory::Category;

int64_t live(Category c) { return memory::report()[c].current; }

TEST(StorageRelease, ReturnsTheBytesAndKeepsIdentity) {
  memory::CategoryScope scope(Category::communication);
  Tensor flat = Tensor::zeros({1024});
  Tensor view = flat.slice_flat(256, {16, 16});
  const int64_t held = live(Category::communication);
  flat.storage()->release();
  EXPECT_EQ(held - live(Category::communication), 1024 * 4);
  EXPECT_TRUE(view.storage()->released());
  EXPECT_THROW(view.raw_data(), Error);  // reading a released storage is an error, not garbage
  flat.storage()->release();             // twice is harmless
  EXPECT_EQ(held - live(Category::communication), 1024 * 4);

  flat.storage()->reacquire();
  EXPECT_EQ(live(Category::communication), held);
  flat.fill_(3.0);
  EXPECT_EQ(view.to_vector()[0], 3.f);  // the view reads the new block
  EXPECT_TRUE(view.shares_storage(flat));
}

TEST(StorageRelease, SavedTensorsOfABackwardReadTheRefilledBlock) {
  // y = x W^T saves W; releasing W's storage after forward and refilling it before backward
  // gives the gradient computed with the refilled values.
  Tensor w = Tensor::from_vector({1, 2, 3, 4}, {2, 2});
  Tensor weight = w.slice_flat(0, {2, 2});
  weight.set_requires_grad(true);
  Tensor x = Tensor::from_vector({1, 1}, {1, 2});
  x.set_requires_grad(true);
  Tensor y = ops::sum(ops::linear(x, weight));
  w.storage()->release();
  w.storage()->reacquire();
  w.copy_(Tensor::from_vector({10, 20, 30, 40}, {2, 2}));
  y.backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{40, 60}));  // column sums of the new W
}

}  // namespace
}  // namespace acc
