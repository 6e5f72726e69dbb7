// Custom functions, re-entrant backward and activation checkpointing.
#include <gtest/gtest.h>

#include "acc/autograd/function.h"
#include "acc/autograd/grad_mode.h"
#include "acc/autograd/node.h"
#include "acc/ops/activation.h"
#include "acc/ops/elementwise.h"
#include "acc/ops/matmul.h"
#include "acc/ops/reduce.h"
#include "gradcheck.h"
#include "support/test_support.h"

namespace acc {
namespace {

// cube(x) = x^3 with a hand-written backward 3x^2 g.
Tensor cube(const Tensor& x) {
  return autograd::apply_function(
      "Cube", {x},
      [](autograd::FunctionContext& ctx, const std::vector<Tensor>& in) {
        ctx.saved = {in[0]};
        return ops::mul(ops::mul(in[0], in[0]), in[0]);
      },
      [](autograd::FunctionContext& ctx, const Tensor& g) {
        const Tensor& x = ctx.saved[0];
        return std::vector<Tensor>{ops::mul(ops::scale(ops::mul(x, x), 3.0), g)};
      });
}

TEST(CustomFunction, ForwardIsNotTapedAndBackwardIsUsed) {
  auto x = test::random_leaves({{6}}, 1);
  Tensor y = cube(x[0]);
  ASSERT_TRUE(y.grad_fn());
  EXPECT_EQ(y.grad_fn()->name(), "Cube");
  EXPECT_EQ(y.grad_fn()->next().size(), 1u);
  EXPECT_TRUE(test::gradcheck([](const test::V& v) { return cube(v[0]); }, test::random_leaves({{6}}, 2)));
}

TEST(CustomFunction, WrongGradientShapeIsReported) {
  Tensor x = test::random_leaves({{3}}, 3)[0];
  Tensor y = autograd::apply_function(
      "Bad", {x}, [](autograd::FunctionContext&, const std::vector<Tensor>& in) { return in[0]; },
      [](autograd::FunctionContext&, const Tensor&) { return std::vector<Tensor>{Tensor::zeros({4})}; });
  try {
    ops::sum(y).backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Bad"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[3]"), std::string::npos) << e.what();
  }
}

TEST(CustomFunction, BackwardMayRunANestedForwardAndBackward) {
  // The backward computes d/dx sum(x*x) with its own nested backward pass.
  auto x = test::random_leaves({{5}}, 4);
  Tensor y = autograd::apply_function(
      "SquareViaNestedBackward", {x[0]},
      [](autograd::FunctionContext& ctx, const std::vector<Tensor>& in) {
        ctx.saved = {in[0].detach()};
        return ops::mul(in[0], in[0]);
      },
      [](autograd::FunctionContext& ctx, const Tensor& g) {
        autograd::NoGradGuard enable(true);
        Tensor z = ctx.saved[0].detach();
        z.set_requires_grad(true);
        ops::sum(ops::mul(z, z)).backward();  // nested pass: z.grad = 2z
        return std::vector<Tensor>{ops::mul(z.grad(), g)};
      });
  ops::sum(y).backward();
  const auto xv = x[0].to_vector(), gv = x[0].grad().to_vector();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_FLOAT_EQ(gv[i], 2 * xv[i]);
}

// A block with parameters: gelu(x W1^T) W2^T, widened so its activations dominate memory.
struct Block {
  Tensor w1, w2;
  Tensor operator()(const Tensor& x) const { return ops::linear(ops::gelu(ops::linear(x, w1)), w2); }
};

TEST(Checkpoint, GradientsEqualPlainRunAndPeakActivationsDrop) {
  const int64_t rows = 256, dim = 32, hidden = 512;
  auto make = [&] {
    auto leaves = test::random_leaves({{rows, dim}, {hidden, dim}, {dim, hidden}}, 5, 0.2f);
    return leaves;
  };
  auto run = [&](bool use_checkpoint, std::vector<Tensor>& leaves, int64_t* peak) {
    Block block{leaves[1], leaves[2]};
    memory::reset_peaks();
    const int64_t base = memory::report()[memory::Category::activations].current;
    Tensor h = leaves[0];
    for (int i = 0; i < 3; ++i)
      h = use_checkpoint ? autograd::checkpoint(block, h) : block(h);
    Tensor loss = ops::mean(ops::mul(h, h));
    loss.backward();
    *peak = memory::report()[memory::Category::activations].peak - base;
    return loss.item();
  };
  auto plain = make(), ckpt = make();
  int64_t peak_plain = 0, peak_ckpt = 0;
  const float loss_plain = run(false, plain, &peak_plain);
  const float loss_ckpt = run(true, ckpt, &peak_ckpt);
  EXPECT_EQ(loss_plain, loss_ckpt);
  for (size_t i = 0; i < plain.size(); ++i)  // same ops in the same order: bitwise equal
    EXPECT_EQ(plain[i].grad().to_vector(), ckpt[i].grad().to_vector()) << "leaf " << i;
  // Plain keeps 3 blocks x 2 hidden [256,512] buffers (1 MB each); checkpointing keeps one
  // block's worth during its recomputation.
  RecordProperty("peak_activation_bytes_plain", std::to_string(peak_plain));
  RecordProperty("peak_activation_bytes_checkpointed", std::to_string(peak_ckpt));
  EXPECT_LT(peak_ckpt, peak_plain * 2 / 3) << peak_ckpt << " vs " << peak_plain;
}

TEST(Checkpoint, ParametersGetGradientsEvenWhenTheInputNeedsNone) {
  auto leaves = test::random_leaves({{4, 3}, {5, 3}, {3, 5}}, 6);
  Tensor x = leaves[0].detach();  // plain data
  Block block{leaves[1], leaves[2]};
  ops::sum(autograd::checkpoint(block, x)).backward();
  EXPECT_TRUE(leaves[1].grad().defined());
  EXPECT_TRUE(leaves[2].grad().defined());
}

}  // namespace
}  // namespace acc
