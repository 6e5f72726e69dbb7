// End to end: a tiny MLP learns a synthetic regression problem with AdamW.
#include <gtest/gtest.h>

#include "acc/autograd/grad_mode.h"
#include "acc/nn/nn.h"
#include "acc/ops/ops.h"
#include "acc/optim/optim.h"
#include "support/test_support.h"

namespace acc {
namespace {

TEST(Training, TinyMlpWithAdamWReducesLossTenfold) {
  // Targets come from a fixed random MLP (the teacher); the student is a wider MLP.
  const int64_t n = 128, in = 6, out = 2;
  nn::MLP teacher(in, 16, out);
  nn::init_parameters(teacher, 1);
  Tensor x = Tensor::from_vector(test::random_vector(n * in, 5), {n, in});
  Tensor y;
  {
    autograd::NoGradGuard no_grad;
    y = teacher(x);
  }
  nn::MLP student(in, 32, out);
  nn::init_parameters(student, 2);
  optim::AdamW adamw(student.parameters(), {.lr = 1e-2, .weight_decay = 0.0});
  optim::LRScheduler sched(adamw, optim::warmup_cosine_lr(1e-2, 1e-3, 10, 100), 1e-2);
  float first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    adamw.zero_grad();
    Tensor diff = ops::sub(student(x), y);
    Tensor loss = ops::mean(ops::mul(diff, diff));
    loss.backward();
    optim::clip_grad_norm(student.parameters(), 1.0);
    adamw.step();
    sched.step();
    if (step == 0) first = loss.item();
    last = loss.item();
  }
  RecordProperty("first_loss", std::to_string(first));
  RecordProperty("last_loss", std::to_string(last));
  EXPECT_LT(last, first / 10) << "first " << first << " last " << last;
}

}  // namespace
}  // namespace acc
