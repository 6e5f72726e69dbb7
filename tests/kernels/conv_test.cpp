#include "acc/kernels/conv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "acc/util/error.h"
#include "support/test_support.h"

namespace acc::kernels {
namespace {

using test::all_close;
using test::random_vector;

int64_t x_size(const Conv2dShape& s) { return s.N * s.C * s.H * s.W; }
int64_t w_size(const Conv2dShape& s) { return s.K * s.C * s.R * s.S; }
int64_t y_size(const Conv2dShape& s) { return s.N * s.K * s.out_h() * s.out_w(); }

// f32 GEMM sums of <= 98 products of N(0,1) values against double: errors ~1e-6; any wrong
// tap or index is O(0.1).
constexpr float kTol = 2e-5f;

const Conv2dShape kShapes[] = {
    {2, 3, 7, 7, 5, 3, 3, 1, 1},  // the brief's case, stride 1
    {2, 3, 7, 7, 5, 3, 3, 2, 1},  // stride 2
    {3, 2, 7, 6, 4, 3, 2, 2, 0},  // non-square input and kernel, no padding
    {1, 1, 5, 5, 1, 1, 1, 1, 0},  // 1x1 kernel
};

TEST(Conv2d, ForwardMatchesReference) {
  uint64_t seed = 1;
  for (const Conv2dShape& s : kShapes)
    for (bool with_bias : {false, true}) {
      const auto x = random_vector(x_size(s), seed++), w = random_vector(w_size(s), seed++);
      const auto b = random_vector(s.K, seed++);
      std::vector<float> y(y_size(s), NAN), want(y_size(s));
      conv2d_fwd(x.data(), w.data(), with_bias ? b.data() : nullptr, y.data(), s);
      ref::conv2d_fwd(x.data(), w.data(), with_bias ? b.data() : nullptr, want.data(), s);
      EXPECT_TRUE(all_close(y, want, kTol, kTol))
          << "C=" << s.C << " stride=" << s.stride << " pad=" << s.pad << " bias=" << with_bias;
    }
}

TEST(Conv2d, BackwardMatchesReferenceAndAccumulatesWeights) {
  uint64_t seed = 100;
  for (const Conv2dShape& s : kShapes)
    for (bool with_dx : {true, false}) {
      const auto x = random_vector(x_size(s), seed++), w = random_vector(w_size(s), seed++);
      const auto dy = random_vector(y_size(s), seed++);
      auto dw = random_vector(w_size(s), seed++), db = random_vector(s.K, seed++);  // prior grads
      auto want_dw = dw, want_db = db;
      std::vector<float> dx(x_size(s), NAN), want_dx(x_size(s));
      conv2d_bwd(dy.data(), x.data(), w.data(), with_dx ? dx.data() : nullptr, dw.data(), db.data(),
                 s);
      ref::conv2d_bwd(dy.data(), x.data(), w.data(), want_dx.data(), want_dw.data(), want_db.data(),
                      s);
      const auto where = ::testing::Message()
                         << "C=" << s.C << " stride=" << s.stride << " pad=" << s.pad;
      if (with_dx) {
        EXPECT_TRUE(all_close(dx, want_dx, kTol, kTol)) << "dx " << where;
      }
      EXPECT_TRUE(all_close(dw, want_dw, kTol, kTol)) << "dw " << where;
      EXPECT_TRUE(all_close(db, want_db, kTol, kTol)) << "db " << where;
    }
}

// Central differences of L = sum(f(x) * G) in double-valued objectives built from the f32
// reference forward. Outputs are rounded once to f32 (~6e-8 relative at O(1) values, summed
// over <= 50 terms), so with step 1e-2 the noise is ~1e-5; the objectives are linear or
// piecewise linear in each input, so truncation error is zero away from kinks.
std::vector<float> numeric_gradient(std::vector<float>& x, const std::function<double()>& loss) {
  std::vector<float> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float x0 = x[i];
    const float up = x[i] = x0 + 1e-2f;
    const double l_up = loss();
    const float down = x[i] = x0 - 1e-2f;
    const double l_down = loss();
    x[i] = x0;
    g[i] = static_cast<float>((l_up - l_down) / (static_cast<double>(up) - down));
  }
  return g;
}

double weighted_sum(const std::vector<float>& y, const std::vector<float>& g) {
  double l = 0;
  for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(y[i]) * g[i];
  return l;
}

TEST(Conv2d, ReferenceBackwardMatchesFiniteDifferences) {
  const Conv2dShape s{1, 2, 4, 5, 2, 3, 3, 2, 1};
  auto x = random_vector(x_size(s), 7), w = random_vector(w_size(s), 8), b = random_vector(s.K, 9);
  const auto gy = random_vector(y_size(s), 10);
  std::vector<float> dx(x_size(s)), dw(w_size(s), 0.f), db(s.K, 0.f);
  ref::conv2d_bwd(gy.data(), x.data(), w.data(), dx.data(), dw.data(), db.data(), s);
  auto loss = [&] {
    std::vector<float> y(y_size(s));
    ref::conv2d_fwd(x.data(), w.data(), b.data(), y.data(), s);
    return weighted_sum(y, gy);
  };
  EXPECT_TRUE(all_close(dx, numeric_gradient(x, loss), 1e-3f, 1e-4f)) << "dx";
  EXPECT_TRUE(all_close(dw, numeric_gradient(w, loss), 1e-3f, 1e-4f)) << "dw";
  EXPECT_TRUE(all_close(db, numeric_gradient(b, loss), 1e-3f, 1e-4f)) << "db";
}

TEST(Conv2d, RejectsBadShapes) {
  float v = 0;
  EXPECT_THROW(conv2d_fwd(&v, &v, nullptr, &v, Conv2dShape{1, 1, 2, 2, 1, 3, 3, 1, 0}), acc::Error);
  EXPECT_THROW(conv2d_fwd(&v, &v, nullptr, &v, Conv2dShape{1, 1, 4, 4, 1, 3, 3, 0, 0}), acc::Error);
  EXPECT_THROW(conv2d_bwd(&v, &v, &v, &v, &v, &v, Conv2dShape{1, 0, 4, 4, 1, 3, 3, 1, 0}),
               acc::Error);
}

const Pool2dShape kPools[] = {
    {2, 3, 7, 7, 2, 2},  // odd size: last row and column are dropped
    {1, 2, 6, 8, 2, 2},
    {2, 2, 7, 5, 3, 2},  // overlapping windows
};

TEST(MaxPool2d, ForwardAndBackwardMatchReference) {
  uint64_t seed = 200;
  for (const Pool2dShape& s : kPools) {
    const int64_t in = s.N * s.C * s.H * s.W, out = s.N * s.C * s.out_h() * s.out_w();
    const auto x = random_vector(in, seed++), dy = random_vector(out, seed++);
    std::vector<float> y(out, NAN), want_y(out), dx(in, NAN), want_dx(in);
    std::vector<int32_t> arg(out, -1), want_arg(out);
    maxpool2d_fwd(x.data(), y.data(), arg.data(), s);
    ref::maxpool2d_fwd(x.data(), want_y.data(), want_arg.data(), s);
    EXPECT_EQ(y, want_y);
    EXPECT_EQ(arg, want_arg);
    maxpool2d_bwd(dy.data(), arg.data(), dx.data(), s);
    ref::maxpool2d_bwd(dy.data(), want_arg.data(), want_dx.data(), s);
    EXPECT_TRUE(all_close(dx, want_dx, 1e-6f, 1e-6f)) << "kernel " << s.kernel;
  }
}

TEST(MaxPool2d, ReferenceBackwardMatchesFiniteDifferences) {
  for (const Pool2dShape& s : kPools) {
    const int64_t in = s.N * s.C * s.H * s.W, out = s.N * s.C * s.out_h() * s.out_w();
    auto x = random_vector(in, 300);
    const auto gy = random_vector(out, 301);
    std::vector<float> y(out), dx(in);
    std::vector<int32_t> arg(out);
    ref::maxpool2d_fwd(x.data(), y.data(), arg.data(), s);
    ref::maxpool2d_bwd(gy.data(), arg.data(), dx.data(), s);
    auto loss = [&] {
      ref::maxpool2d_fwd(x.data(), y.data(), arg.data(), s);
      return weighted_sum(y, gy);
    };
    // A step can cross a kink only if two window values lie within 1e-2 of each other; those
    // few inputs are skipped by comparing only where the argmax is stable under the step.
    const auto numeric = numeric_gradient(x, loss);
    int64_t compared = 0;
    for (int64_t i = 0; i < in; ++i) {
      if (std::fabs(numeric[i] - dx[i]) <= 1e-4f) {
        ++compared;
        continue;
      }
      const float x0 = x[i];
      std::vector<float> base(out), moved(out);
      std::vector<int32_t> a0(out), a1(out);
      ref::maxpool2d_fwd(x.data(), base.data(), a0.data(), s);
      x[i] = x0 + 1e-2f;
      ref::maxpool2d_fwd(x.data(), moved.data(), a1.data(), s);
      x[i] = x0 - 1e-2f;
      std::vector<int32_t> a2(out);
      ref::maxpool2d_fwd(x.data(), moved.data(), a2.data(), s);
      x[i] = x0;
      EXPECT_TRUE(a0 != a1 || a0 != a2)
          << "gradient mismatch at stable input " << i << ": " << dx[i] << " vs " << numeric[i];
    }
    EXPECT_GT(compared, in * 9 / 10);
  }
}

TEST(MaxPool2d, RejectsWindowLargerThanInput) {
  float v = 0;
  int32_t a = 0;
  EXPECT_THROW(maxpool2d_fwd(&v, &v, &a, Pool2dShape{1, 1, 1, 1, 2, 2}), acc::Error);
}

}  // namespace
}  // namespace acc::kernels
