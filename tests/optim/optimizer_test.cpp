// Optimizers against hand-written double-precision loops, state accounting, schedules, clipping.
#include <gtest/gtest.h>

#include <cmath>

#include "acc/optim/optim.h"
#include "support/test_support.h"

namespace acc {
namespace {

Tensor param(int64_t n, uint64_t seed) {
  Tensor t = Tensor::from_vector(test::random_vector(n, seed), {n});
  t.set_requires_grad(true);
  return t;
}

std::vector<double> to_double(const Tensor& t) {
  const auto v = t.to_vector();
  return {v.begin(), v.end()};
}

// f32 kernels vs a double loop: each step rounds to f32 (relative ~6e-8), and Adam's update
// divides by sqrt(v)+eps, which amplifies rounding of tiny v; a few steps stay within 1e-5.
constexpr float kRtol = 1e-5f, kAtol = 1e-6f;

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

TEST(AdamW, MatchesDoubleLoopWithPerGroupLrAndWeightDecay) {
  const optim::AdamWOptions opt{.lr = 1e-2, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1};
  Tensor a = param(37, 1), b = param(5, 2);
  optim::ParamGroup g0, g1;
  g0.params = {a};
  g1.params = {b};
  g1.lr = 3e-2;
  g1.weight_decay = 0.0;
  optim::AdamW adamw({g0, g1}, opt);
  struct Ref {
    std::vector<double> p, m, v;
    double lr, wd;
  };
  std::vector<Ref> ref = {{to_double(a), std::vector<double>(37), std::vector<double>(37), 1e-2, 0.1},
                          {to_double(b), std::vector<double>(5), std::vector<double>(5), 3e-2, 0.0}};
  std::vector<Tensor> params = {a, b};
  for (int step = 1; step <= 4; ++step) {
    for (size_t k = 0; k < params.size(); ++k) {
      const auto g = test::random_vector(params[k].numel(), 100 + step * 10 + k);
      params[k].set_grad(Tensor::from_vector(g, params[k].shape()));
      Ref& r = ref[k];
      for (size_t i = 0; i < r.p.size(); ++i) {
        r.p[i] -= r.lr * r.wd * r.p[i];
        r.m[i] = opt.beta1 * r.m[i] + (1 - opt.beta1) * g[i];
        r.v[i] = opt.beta2 * r.v[i] + (1 - opt.beta2) * static_cast<double>(g[i]) * g[i];
        const double mhat = r.m[i] / (1 - std::pow(opt.beta1, step));
        const double vhat = r.v[i] / (1 - std::pow(opt.beta2, step));
        r.p[i] -= r.lr * mhat / (std::sqrt(vhat) + opt.eps);
      }
    }
    adamw.step();
    for (size_t k = 0; k < params.size(); ++k)
      ASSERT_TRUE(test::all_close(params[k].to_vector(), to_float(ref[k].p), kRtol, kAtol))
          << "step " << step << " group " << k;
  }
  EXPECT_EQ(adamw.steps_taken(), 4);
}

TEST(AdamW, StateIsOptimizerStateAndBf16CopyIsWritten) {
  Tensor p = param(1000, 3);
  optim::ParamGroup group;
  group.params = {p};
  Tensor copy = Tensor::zeros({1000}, DType::bf16);
  group.bf16_copies = {copy};
  optim::AdamW adamw({group});
  const int64_t before = memory::report()[memory::Category::optimizer_state].current;
  adamw.step();  // no gradient yet: nothing happens
  EXPECT_EQ(memory::report()[memory::Category::optimizer_state].current, before);
  p.set_grad(Tensor::full({1000}, 1.0));
  adamw.step();
  EXPECT_EQ(memory::report()[memory::Category::optimizer_state].current - before, 2 * 1000 * 4);
  EXPECT_EQ(copy.to_vector(), p.to(DType::bf16).to_vector());
}

TEST(Optimizer, RejectsNonF32Parameters) {
  Tensor p = Tensor::zeros({3}, DType::bf16);
  try {
    optim::AdamW adamw(std::vector<Tensor>{p});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bf16[3]"), std::string::npos) << e.what();
  }
}

TEST(SGD, MomentumNesterovAndWeightDecayMatchDoubleLoop) {
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "classic");
    const optim::SGDOptions opt{.lr = 0.1, .momentum = 0.9, .dampening = 0.0, .weight_decay = 0.01,
                                .nesterov = nesterov};
    Tensor p = param(29, 4);
    optim::SGD sgd(std::vector<Tensor>{p}, opt);
    std::vector<double> ref = to_double(p), buf(29);
    for (int step = 1; step <= 4; ++step) {
      const auto g = test::random_vector(29, 200 + step);
      p.set_grad(Tensor::from_vector(g, {29}));
      for (size_t i = 0; i < ref.size(); ++i) {
        double d = g[i] + opt.weight_decay * ref[i];
        buf[i] = step == 1 ? d : opt.momentum * buf[i] + (1 - opt.dampening) * d;
        d = nesterov ? d + opt.momentum * buf[i] : buf[i];
        ref[i] -= opt.lr * d;
      }
      sgd.step();
      ASSERT_TRUE(test::all_close(p.to_vector(), to_float(ref), kRtol, kAtol)) << "step " << step;
    }
  }
  EXPECT_THROW(optim::SGD(std::vector<Tensor>{param(2, 5)}, {.nesterov = true}), Error);
}

TEST(SGD, PlainStepAndZeroGrad) {
  Tensor p = Tensor::from_vector({1, 2}, {2});
  p.set_requires_grad(true);
  optim::SGD sgd(std::vector<Tensor>{p}, {.lr = 0.5});
  p.set_grad(Tensor::from_vector({2, -2}, {2}));
  sgd.step();
  EXPECT_EQ(p.to_vector(), (std::vector<float>{0, 3}));
  sgd.zero_grad(false);
  EXPECT_EQ(p.grad().to_vector(), (std::vector<float>{0, 0}));
  sgd.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

TEST(LRSchedule, WarmupCosineAtKeySteps) {
  auto lr = optim::warmup_cosine_lr(1e-3, 1e-4, 10, 110);
  EXPECT_DOUBLE_EQ(lr(0), 1e-4);       // (0+1)/10 of max
  EXPECT_DOUBLE_EQ(lr(4), 5e-4);
  EXPECT_DOUBLE_EQ(lr(9), 1e-3);       // end of warmup
  EXPECT_DOUBLE_EQ(lr(10), 1e-3);      // cosine starts at max
  EXPECT_NEAR(lr(60), 5.5e-4, 1e-15);  // halfway: (max+min)/2
  EXPECT_NEAR(lr(110), 1e-4, 1e-15);
  EXPECT_DOUBLE_EQ(lr(1000), 1e-4);
  EXPECT_DOUBLE_EQ(optim::constant_lr(3e-4)(12345), 3e-4);
  EXPECT_THROW(optim::warmup_cosine_lr(1e-3, 1e-2, 10, 100), Error);
}

TEST(LRSchedule, SchedulerKeepsGroupRatios) {
  optim::ParamGroup g0, g1;
  g0.params = {param(2, 6)};
  g1.params = {param(2, 7)};
  g1.lr = 5e-4;  // half the default
  optim::AdamW adamw({g0, g1}, {.lr = 1e-3});
  optim::LRScheduler sched(adamw, optim::warmup_cosine_lr(1e-3, 0.0, 4, 8), 1e-3);
  EXPECT_DOUBLE_EQ(adamw.lr(0), 2.5e-4);
  EXPECT_DOUBLE_EQ(adamw.lr(1), 1.25e-4);
  for (int i = 0; i < 3; ++i) sched.step();
  EXPECT_EQ(sched.current_step(), 3);
  EXPECT_DOUBLE_EQ(adamw.lr(0), 1e-3);
  EXPECT_DOUBLE_EQ(adamw.lr(1), 5e-4);
}

TEST(ClipGradNorm, ScalesExactlyToMaxNormAndLeavesSmallNormsAlone) {
  Tensor a = param(2, 8), b = param(1, 9), c = param(3, 10);
  a.set_grad(Tensor::from_vector({3, 4}, {2}));
  b.set_grad(Tensor::from_vector({12}, {1}));  // c has no gradient
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm({a, b, c}, 6.5), 13.0);
  EXPECT_EQ(a.grad().to_vector(), (std::vector<float>{1.5f, 2.f}));
  EXPECT_EQ(b.grad().to_vector(), (std::vector<float>{6.f}));
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm({a, b, c}, 100.0), 6.5);
  EXPECT_EQ(b.grad().to_vector(), (std::vector<float>{6.f}));
  Tensor h = Tensor::zeros({2}, DType::bf16);
  h.set_requires_grad(true);
  h.set_grad(Tensor::from_vector({6, 8}, {2}, DType::bf16));
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm({h}, 5.0), 10.0);
  EXPECT_EQ(h.grad().to_vector(), (std::vector<float>{3, 4}));
  EXPECT_THROW(optim::clip_grad_norm({a}, 0.0), Error);
}

}  // namespace
}  // namespace acc
