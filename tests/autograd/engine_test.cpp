// The backward engine: accumulation, hooks, callbacks, grad mode, release of saved tensors.
#include <gtest/gtest.h>

#include <thread>

#include "acc/autograd/engine.h"
#include "acc/autograd/function.h"
#include "acc/autograd/grad_mode.h"
#include "acc/ops/elementwise.h"
#include "acc/ops/reduce.h"
#include "support/test_support.h"

namespace acc {
namespace {

Tensor leaf(const std::vector<float>& v, const Shape& shape, DType dtype = DType::f32) {
  Tensor t = Tensor::from_vector(v, shape, dtype);
  t.set_requires_grad(true);
  return t;
}

TEST(Engine, GradientsMeetingAtATensorAreSummed) {
  Tensor x = leaf({1, 2, 3}, {3});
  // L = sum(x*x + 3x) => dL/dx = 2x + 3
  ops::sum(ops::add(ops::mul(x, x), ops::scale(x, 3.0))).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{5, 7, 9}));
}

TEST(Engine, SecondBackwardAccumulatesIntoLeafGrad) {
  Tensor x = leaf({1, 2}, {2});
  ops::sum(ops::scale(x, 2.0)).backward();
  ops::sum(ops::scale(x, 3.0)).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{5, 5}));
}

TEST(Engine, LeafGradIsCountedAsGradients) {
  Tensor x = leaf(std::vector<float>(1000, 1.f), {1000});
  const int64_t before = memory::report()[memory::Category::gradients].current;
  ops::sum(x).backward();
  EXPECT_EQ(memory::report()[memory::Category::gradients].current - before, 4000);
}

TEST(Engine, Bf16LeafGetsBf16Gradient) {
  Tensor x = leaf({1, 2, 3}, {3}, DType::bf16);
  ops::sum(ops::scale(x, 0.5)).backward();
  ASSERT_EQ(x.grad().dtype(), DType::bf16);
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{0.5f, 0.5f, 0.5f}));
}

TEST(Engine, BackwardTwiceThroughReleasedGraphFails) {
  Tensor x = leaf({1, 2}, {2});
  Tensor loss = ops::sum(ops::mul(x, x));
  loss.backward();
  try {
    loss.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos) << e.what();
  }
}

TEST(Engine, NonScalarNeedsSeedAndSeedShapeMustMatch) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = ops::scale(x, 2.0);
  EXPECT_THROW(y.backward(), Error);
  EXPECT_THROW(y.backward(Tensor::zeros({3})), Error);
  y.backward(Tensor::from_vector({1, 10}, {2}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{2, 20}));
}

TEST(Engine, NoGradGuardStopsRecording) {
  Tensor x = leaf({1, 2}, {2});
  {
    autograd::NoGradGuard no_grad;
    EXPECT_FALSE(autograd::GradMode::is_enabled());
    Tensor y = ops::mul(x, x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
  }
  EXPECT_TRUE(autograd::GradMode::is_enabled());
  EXPECT_TRUE(ops::mul(x, x).requires_grad());
  EXPECT_THROW(Tensor::zeros({2}).backward(), Error);  // nothing to differentiate
}

TEST(Engine, TensorHookCanReplaceGradient) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = ops::scale(x, 2.0);
  std::vector<float> seen;
  y.register_hook([&](const Tensor& g) {
    seen = g.to_vector();
    return Tensor::from_vector({100, 200}, {2});
  });
  ops::sum(y).backward();
  EXPECT_EQ(seen, (std::vector<float>{1, 1}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{200, 400}));
}

TEST(Engine, LeafHookSeesGradientBeforeAccumulation) {
  Tensor x = leaf({1, 2}, {2});
  x.register_hook([](const Tensor& g) { return ops::scale(g, 10.0); });
  ops::sum(x).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{10, 10}));
}

TEST(Engine, PostAccumulateHookRunsAfterGradIsUpdatedAndCanBeRemoved) {
  Tensor x = leaf({1, 2}, {2});
  std::vector<std::vector<float>> seen;
  auto handle = autograd::register_post_accumulate_hook(
      x, [&](Tensor& t) { seen.push_back(t.grad().to_vector()); });
  ops::sum(ops::scale(x, 3.0)).backward();
  ops::sum(ops::scale(x, 3.0)).backward();
  handle.remove();
  ops::sum(x).backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::vector<float>{3, 3}));
  EXPECT_EQ(seen[1], (std::vector<float>{6, 6}));
  EXPECT_THROW(autograd::register_post_accumulate_hook(ops::scale(x, 1.0), [](Tensor&) {}), Error);
}

TEST(Engine, GradientSinkTakesTheSummedGradientInsteadOfGrad) {
  Tensor x = leaf({1, 2}, {2});
  std::vector<std::vector<float>> sunk;
  int after = 0;
  auto sink = autograd::set_gradient_sink(x, [&](const Tensor& g) { sunk.push_back(g.to_vector()); });
  autograd::register_post_accumulate_hook(x, [&](Tensor&) { ++after; });
  ops::sum(ops::add(ops::scale(x, 3.0), ops::mul(x, x))).backward();  // two uses: one call
  ASSERT_EQ(sunk.size(), 1u);
  EXPECT_EQ(sunk[0], (std::vector<float>{5, 7}));  // 3 + 2x
  EXPECT_FALSE(x.grad().defined());
  EXPECT_EQ(after, 1);
  EXPECT_THROW(autograd::set_gradient_sink(x, [](const Tensor&) {}), Error);  // one sink a leaf
  sink.remove();
  ops::sum(x).backward();
  EXPECT_EQ(sunk.size(), 1u);
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{1, 1}));
}

TEST(Engine, QueuedCallbackRunsOnceWhenBackwardEnds) {
  Tensor a = leaf({1}, {1}), b = leaf({2}, {1});
  int calls = 0;
  bool grads_done_at_callback = false;
  autograd::register_post_accumulate_hook(a, [&](Tensor&) {
    autograd::queue_callback([&] {
      ++calls;
      grads_done_at_callback = a.grad().defined() && b.grad().defined();
    });
  });
  ops::sum(ops::add(ops::scale(a, 2.0), ops::scale(b, 2.0))).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(grads_done_at_callback);
  EXPECT_THROW(autograd::queue_callback([] {}), Error);
}

TEST(Engine, SavedActivationsAreFreedDuringBackward) {
  // A chain of mul ops, each saving its 4 MB input; by the time the first op's input (the leaf)
  // receives its gradient, every later node has run and dropped what it saved.
  const int64_t n = 1 << 20;
  Tensor x = leaf(std::vector<float>(static_cast<size_t>(n), 1.f), {n});
  Tensor w = Tensor::full({n}, 1.0);
  Tensor y = x;
  for (int i = 0; i < 8; ++i) y = ops::mul(y, w);
  Tensor loss = ops::sum(y);
  y = Tensor();
  const int64_t after_forward = memory::report()[memory::Category::activations].current;
  int64_t at_leaf = -1;
  autograd::register_post_accumulate_hook(
      x, [&](Tensor&) { at_leaf = memory::report()[memory::Category::activations].current; });
  loss.backward();
  ASSERT_GE(at_leaf, 0);
  // Outputs 1..7 (4 MB each) are saved by the next mul after forward; when the leaf is reached
  // only the gradient in flight (and at most one more buffer) may remain.
  EXPECT_GE(after_forward, 7 * 4 * n);
  EXPECT_LE(at_leaf, after_forward - 5 * 4 * n);
}

TEST(Engine, GradFunctionReturnsGradientsWithoutAccumulating) {
  Tensor x = leaf({1, 2}, {2});
  Tensor w = leaf({3, 4}, {2});
  auto grads = autograd::grad(ops::sum(ops::mul(x, w)), Tensor(), {x});
  EXPECT_EQ(grads[0].to_vector(), (std::vector<float>{3, 4}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{1, 2}));
}

TEST(Engine, RequiresGradOnlyOnFloatingLeaves) {
  Tensor ids = Tensor::from_vector_i32({1, 2}, {2});
  EXPECT_THROW(ids.set_requires_grad(true), Error);
  Tensor x = leaf({1}, {1});
  Tensor y = ops::scale(x, 2.0);
  EXPECT_THROW(y.set_requires_grad(false), Error);
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.shares_storage(y));
}

}  // namespace
}  // namespace acc

namespace acc {
namespace {

TEST(Engine, LeafUsedTwiceIsAccumulatedOnceWithTheSum) {
  // A strategy reduce-scatters in the post-accumulate hook: it must fire once per backward,
  // with the complete gradient, even when the leaf feeds several ops (tied weights).
  Tensor w = Tensor::from_vector({1, 2}, {2});
  w.set_requires_grad(true);
  int calls = 0;
  std::vector<float> seen;
  autograd::register_post_accumulate_hook(w, [&](Tensor& t) {
    ++calls;
    seen = t.grad().to_vector();
  });
  ops::sum(ops::add(ops::scale(w, 2.0), ops::scale(w, 5.0))).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<float>{7, 7}));
}

TEST(Engine, GradModeIsPerThread) {
  autograd::NoGradGuard no_grad;
  bool other_thread_enabled = false;
  std::thread([&] { other_thread_enabled = autograd::GradMode::is_enabled(); }).join();
  EXPECT_TRUE(other_thread_enabled);
  EXPECT_FALSE(autograd::GradMode::is_enabled());
}

}  // namespace
}  // namespace acc
