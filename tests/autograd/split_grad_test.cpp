// A backward in two parts (autograd/split_grad.h): the same gradients as one pass, the first
// part asking separable nodes only for the inputs that are not weights.
#include <gtest/gtest.h>

#include "acc/autograd/engine.h"
#include "acc/autograd/function.h"
#include "acc/autograd/split_grad.h"
#include "acc/ops/activation.h"
#include "acc/ops/elementwise.h"
#include "acc/ops/embedding.h"
#include "acc/ops/matmul.h"
#include "acc/ops/norm.h"
#include "acc/ops/reduce.h"
#include "acc/ops/shape.h"
#include "support/test_support.h"

namespace acc {
namespace {

Tensor leaf(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::randn(shape, seed, "split_grad_test");
  t.set_requires_grad(true);
  return t;
}

// A small stage: embedded ids plus a received input, a norm, two linears around a GELU and a
// matmul with a transposed weight; weights reach the loss through separable nodes (linear,
// matmul), a node that is not (the norm) and chains of one-input nodes (transpose, embedding).
struct Stage {
  Tensor input = leaf({6, 8}, 1), table = leaf({10, 8}, 2), gamma = leaf({8}, 3), beta = leaf({8}, 4),
         w1 = leaf({16, 8}, 5), b1 = leaf({16}, 6), w2 = leaf({8, 16}, 7), w3 = leaf({5, 8}, 8);
  Tensor ids = Tensor::from_vector_i64({1, 3, 3, 0, 9, 2}, {6});
  std::vector<Tensor> weights() const { return {table, gamma, beta, w1, b1, w2, w3}; }
  Tensor output() const {
    Tensor h = ops::layer_norm(ops::add(input, ops::embedding(table, ids)), gamma, beta);
    h = ops::add(h, ops::linear(ops::gelu(ops::linear(h, w1, b1)), w2, Tensor()));
    return ops::matmul(h, ops::transpose(w3));
  }
};

void expect_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].defined(), b[i].defined()) << i;
    if (a[i].defined()) {
      EXPECT_EQ(a[i].to_vector(), b[i].to_vector()) << "tensor " << i;
    }
  }
}

// Each weight's gradient: what the first part gave it plus what the second did.
std::vector<Tensor> joined(const std::vector<Tensor>& now, const std::vector<Tensor>& later) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < now.size(); ++i)
    out.push_back(!now[i].defined() ? later[i] : !later[i].defined() ? now[i] : ops::add(now[i], later[i]));
  return out;
}

TEST(SplitGrad, GivesTheGradientsOfOnePass) {
  Stage stage;
  const Tensor seed = Tensor::randn({6, 5}, 9, "seed");
  std::vector<Tensor> all{stage.input};
  for (const Tensor& w : stage.weights()) all.push_back(w);
  const std::vector<Tensor> whole = autograd::grad(stage.output(), seed, all);

  auto split = autograd::split_grad(stage.output(), seed, {stage.input}, stage.weights());
  expect_same(split.inputs, {whole[0]});
  ASSERT_TRUE(split.weights.pending());
  // The norm gives gamma and beta theirs in the first part; the linears', the embedding's and
  // the transposed weight's come in the second.
  const std::vector<Tensor> later = split.weights.compute();
  for (size_t i = 0; i < later.size(); ++i)
    EXPECT_NE(split.weights_now[i].defined(), later[i].defined()) << "weight " << i;
  EXPECT_TRUE(split.weights_now[1].defined() && split.weights_now[2].defined());
  expect_same(joined(split.weights_now, later), std::vector<Tensor>(whole.begin() + 1, whole.end()));
  EXPECT_FALSE(split.weights.pending());
  test::expect_contains(test::error_of([&] { split.weights.compute(); }), {"computed already"});
}

TEST(SplitGrad, AFirstStageWithoutInputsStillSplits) {
  Stage stage;
  stage.input = Tensor::randn({6, 8}, 1, "split_grad_test");  // the first stage receives nothing
  const Tensor seed = Tensor::randn({6, 5}, 9, "seed");
  const std::vector<Tensor> whole = autograd::grad(stage.output(), seed, stage.weights());
  auto split = autograd::split_grad(stage.output(), seed, {}, stage.weights());
  EXPECT_TRUE(split.inputs.empty());
  expect_same(joined(split.weights_now, split.weights.compute()), whole);
}

// A separable op recording which inputs each call of its backward was asked for.
Tensor spy_product(const Tensor& x, const Tensor& w, std::vector<std::string>& calls) {
  Tensor out = ops::matmul(x.detach(), w.detach());
  autograd::record(
      "spy", out, {x, w},
      [x = x.detach(), w = w.detach(), &calls](const Tensor& g) {
        std::string asked;
        std::vector<Tensor> grads(2);
        if (autograd::input_wanted(0)) {
          asked += "x";
          grads[0] = ops::matmul(g, w, false, true);
        }
        if (autograd::input_wanted(1)) {
          asked += "w";
          grads[1] = ops::matmul(x, g, true, false);
        }
        calls.push_back(asked);
        return grads;
      },
      autograd::Inputs::separable);
  return out;
}

TEST(SplitGrad, TheFirstPartAsksOnlyForTheInputsAndTheSecondOnlyForTheWeights) {
  Tensor x = leaf({3, 4}, 1), w = leaf({4, 2}, 2), v = leaf({2, 2}, 3);
  std::vector<std::string> calls;
  Tensor y = ops::sum(spy_product(spy_product(x, w, calls), v, calls));
  auto split = autograd::split_grad(y, Tensor(), {x}, {w, v});
  EXPECT_EQ(calls, (std::vector<std::string>{"x", "x"}));
  const auto weights = split.weights.compute();
  EXPECT_EQ(calls, (std::vector<std::string>{"x", "x", "w", "w"}));
  // A plain backward asks for everything at once.
  calls.clear();
  Tensor y2 = ops::sum(spy_product(spy_product(x, w, calls), v, calls));
  const auto whole = autograd::grad(y2, Tensor(), {x, w, v});
  EXPECT_EQ(calls, (std::vector<std::string>{"xw", "xw"}));
  expect_same(split.inputs, {whole[0]});
  expect_same(weights, {whole[1], whole[2]});
}

TEST(SplitGrad, KeptNodesHoldTheirOutputsGradientUntilTheSecondPart) {
  Tensor x = leaf({64, 256}, 1), w = leaf({1024, 256}, 2);
  const auto activations = [] { return memory::report()[memory::Category::activations].current; };
  const int64_t before = activations();
  auto split = [&] {
    Tensor y = ops::sum(ops::gelu(ops::linear(x, w, Tensor())));
    return autograd::split_grad(y, Tensor(), {x}, {w});
  }();
  // Between the parts the linear keeps the gradient of its output (64 x 1024 f32, 256 KiB),
  // not the weight's (1024 x 256, 1 MiB): that is made in the second part.
  const int64_t held = activations() - before;
  EXPECT_GE(held, 64 * 1024 * 4);
  EXPECT_LT(held, 1024 * 256 * 4);
  const auto weights = split.weights.compute();
  EXPECT_EQ(weights[0].shape(), (Shape{1024, 256}));
  EXPECT_LE(activations() - before - weights[0].nbytes(), held - 64 * 1024 * 4);
}

// With a bf16 weight the product runs in bf16: the first part makes the linear's output
// gradient bf16 once and the engine holds that for the second part, not the f32 one; the
// bias's gradient, a sum in f32, is made in the first part and handed out in the second.
TEST(SplitGrad, ABf16ProductKeepsItsGradientInBf16) {
  Tensor x = leaf({64, 256}, 1), w = Tensor::randn({4096, 256}, 2, "split_grad_test").to(DType::bf16);
  w.set_requires_grad(true);
  Tensor b = leaf({4096}, 3);
  const auto output = [&] { return ops::sum(ops::gelu(ops::linear(x, w, b))); };
  const std::vector<Tensor> whole = autograd::grad(output(), Tensor(), {x, w, b});
  const auto activations = [] { return memory::report()[memory::Category::activations].current; };
  const int64_t before = activations();
  auto split = [&] { return autograd::split_grad(output(), Tensor(), {x}, {w, b}); }();
  const int64_t held = activations() - before;
  EXPECT_GE(held, 64 * 4096 * 2);  // the bf16 gradient
  EXPECT_LT(held, 64 * 4096 * 4);  // not the f32 one (1 MiB)
  expect_same(split.inputs, {whole[0]});
  EXPECT_FALSE(split.weights_now[0].defined() || split.weights_now[1].defined());
  expect_same(split.weights.compute(), {whole[1], whole[2]});
}

// The same for matmul's backward.
TEST(SplitGrad, ABf16MatmulKeepsItsGradientInBf16) {
  Tensor x = leaf({64, 256}, 1), w = Tensor::randn({256, 4096}, 2, "split_grad_test").to(DType::bf16);
  w.set_requires_grad(true);
  const auto output = [&] { return ops::sum(ops::gelu(ops::matmul(x, w))); };
  const std::vector<Tensor> whole = autograd::grad(output(), Tensor(), {x, w});
  const auto activations = [] { return memory::report()[memory::Category::activations].current; };
  const int64_t before = activations();
  auto split = [&] { return autograd::split_grad(output(), Tensor(), {x}, {w}); }();
  const int64_t held = activations() - before;
  EXPECT_GE(held, 64 * 4096 * 2);
  EXPECT_LT(held, 64 * 4096 * 4);
  expect_same(split.inputs, {whole[0]});
  expect_same(split.weights.compute(), {whole[1]});
}

TEST(SplitGrad, AWeightThatIsAlsoAnInputIsAnError) {
  Tensor x = leaf({2, 2}, 1);
  test::expect_contains(test::error_of([&] { autograd::split_grad(ops::sum(x), Tensor(), {x}, {x}); }),
                        {"autograd::split_grad", "both the inputs and the weights"});
}

}  // namespace
}  // namespace acc
