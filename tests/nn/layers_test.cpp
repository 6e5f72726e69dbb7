// The basic modules compute what the ops they wrap compute, with the right shapes and modes.
#include <gtest/gtest.h>

#include "acc/nn/nn.h"
#include "acc/ops/ops.h"
#include "support/test_support.h"

namespace acc {
namespace {

Tensor input(const Shape& shape, uint64_t seed) {
  return Tensor::from_vector(test::random_vector(shape_numel(shape), seed), shape);
}

TEST(Layers, LinearMatchesPlainLoop) {
  nn::Linear lin(5, 3);
  Tensor x = input({2, 5}, 1);
  const auto y = lin(x).to_vector();
  const auto w = lin.param("weight").to_vector(), b = lin.param("bias").to_vector(), xv = x.to_vector();
  for (int r = 0; r < 2; ++r)
    for (int o = 0; o < 3; ++o) {
      double acc = b[static_cast<size_t>(o)];
      for (int i = 0; i < 5; ++i) acc += static_cast<double>(xv[static_cast<size_t>(r * 5 + i)]) * w[static_cast<size_t>(o * 5 + i)];
      EXPECT_NEAR(y[static_cast<size_t>(r * 3 + o)], acc, 1e-5);
    }
  EXPECT_EQ(nn::Linear(5, 3, false).named_parameters().size(), 1u);
}

TEST(Layers, ShapesOfEveryModule) {
  EXPECT_EQ(nn::Embedding(10, 6)(Tensor::from_vector_i32({1, 2, 9, 0}, {2, 2})).shape(), (Shape{2, 2, 6}));
  EXPECT_EQ(nn::LayerNorm(7)(input({3, 7}, 2)).shape(), (Shape{3, 7}));
  EXPECT_EQ(nn::RMSNorm(7)(input({3, 7}, 3)).shape(), (Shape{3, 7}));
  EXPECT_EQ(nn::MLP(7, 16, 5)(input({3, 7}, 4)).shape(), (Shape{3, 5}));
  EXPECT_EQ(nn::Conv2d(3, 4, 3, 1, 1)(input({2, 3, 5, 5}, 5)).shape(), (Shape{2, 4, 5, 5}));
  EXPECT_EQ(nn::Conv2d(3, 4, 3, 2, 0)(input({2, 3, 7, 7}, 6)).shape(), (Shape{2, 4, 3, 3}));
  EXPECT_EQ(nn::MaxPool2d(2)(input({2, 3, 6, 6}, 7)).shape(), (Shape{2, 3, 3, 3}));
  EXPECT_EQ(nn::Flatten()(input({2, 3, 2, 2}, 8)).shape(), (Shape{2, 12}));
  EXPECT_EQ(nn::GELU()(input({4}, 9)).to_vector(), ops::gelu(input({4}, 9)).to_vector());
  EXPECT_EQ(nn::SiLU()(input({4}, 9)).to_vector(), ops::silu(input({4}, 9)).to_vector());
}

TEST(Layers, SmallCnnTrainsEndToEnd) {
  nn::Sequential cnn{std::make_shared<nn::Conv2d>(1, 4, 3, 1, 1), std::make_shared<nn::GELU>(),
                     std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(),
                     std::make_shared<nn::Linear>(4 * 4 * 4, 3)};
  EXPECT_EQ(cnn.named_parameters()[0].first, "0.weight");
  EXPECT_EQ(cnn.named_parameters().back().first, "4.bias");
  Tensor loss = ops::cross_entropy(cnn(input({2, 1, 8, 8}, 10)), Tensor::from_vector_i32({0, 2}, {2}));
  loss.backward();
  for (auto& [name, p] : cnn.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
}

TEST(Layers, DropoutOnlyInTrainingAndKeyedByStep) {
  nn::Dropout drop(0.5, 3);
  Tensor x = Tensor::full({1000}, 1.0);
  const auto a = drop(x).to_vector();
  EXPECT_NE(a, x.to_vector());
  EXPECT_EQ(drop(x).to_vector(), a);  // same step, same mask (checkpoint recomputation)
  drop.set_step(1);
  EXPECT_NE(drop(x).to_vector(), a);
  drop.eval();
  EXPECT_EQ(drop(x).to_vector(), x.to_vector());
  EXPECT_THROW(nn::Dropout(1.5), Error);
}

}  // namespace
}  // namespace acc
