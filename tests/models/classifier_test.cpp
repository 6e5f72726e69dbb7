// Image classifiers: shapes, names, deterministic init and a few training steps.
#include <gtest/gtest.h>

#include "acc/models/classifiers.h"
#include "acc/optim/optim.h"
#include "support/test_support.h"

namespace acc {
namespace {

// Images of digit-like classes: class c lights a band of rows around 2c (plus noise), so a
// classifier that learns anything separates them.
data::Batch image_batch(int64_t n, int64_t side, uint64_t seed) {
  auto noise = test::random_vector(n * side * side, seed, 0.1f);
  auto labels = test::random_ints(n, seed + 1, 0, 10);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < side; ++r)
      if (r / 2 == labels[i] % (side / 2))
        for (int64_t c = 0; c < side; ++c) noise[(i * side + r) * side + c] += 1.f;
  data::Batch batch;
  batch.set("images", Tensor::from_vector(noise, {n, 1, side, side}));
  batch.set("labels", Tensor::from_vector_i32(labels, {n}));
  return batch;
}

void expect_learns(models::Model& model, const data::Batch& batch, double lr) {
  optim::AdamW opt(model.parameters(), {.lr = lr, .weight_decay = 0.0});
  float first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    opt.zero_grad();
    Tensor loss = model.forward(batch).loss;
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item();
  }
  EXPECT_LT(last, 0.5f * first) << "first " << first << ", last " << last;
}

TEST(Classifiers, MlpShapesNamesAndTraining) {
  models::MLPClassifier model(20 * 20, 33, 10, 1);
  auto batch = image_batch(12, 20, 3);
  EXPECT_EQ(model.forward(batch).logits.shape(), (Shape{12, 10}));
  EXPECT_EQ(model.parameter("net.1.weight").shape(), (Shape{33, 400}));
  EXPECT_EQ(model.parameter("net.3.bias").shape(), Shape{10});
  expect_learns(model, batch, 3e-3);
}

TEST(Classifiers, CnnShapesInitAndTraining) {
  models::CNNClassifier a(20, 4, 6, 10, 7), b(20, 4, 6, 10, 7);
  EXPECT_EQ(a.parameter("net.0.weight").shape(), (Shape{4, 1, 3, 3}));
  EXPECT_EQ(a.parameter("net.7.weight").shape(), (Shape{10, 6 * 5 * 5}));
  EXPECT_EQ(a.parameter("net.3.weight").to_vector(), b.parameter("net.3.weight").to_vector());
  auto batch = image_batch(12, 20, 5);
  EXPECT_EQ(a.forward(batch).logits.shape(), (Shape{12, 10}));
  expect_learns(a, batch, 1e-2);
  EXPECT_THROW(models::CNNClassifier(18), Error);
}

}  // namespace
}  // namespace acc
