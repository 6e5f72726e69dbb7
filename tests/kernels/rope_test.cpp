// rope: fast vs reference (odd half-dims, offsets), a hand-computed rotation, in-place use,
// backward as the inverse / adjoint of forward, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "acc/kernels/rope.h"
#include "acc/util/error.h"
#include "support/test_support.h"

namespace acc::kernels {
namespace {

using test::all_close;
using test::random_vector;
using Vec = std::vector<float>;

int64_t numel(const RopeShape& s) { return s.B * s.H * s.T * s.D; }

RopeShape shape(int64_t B, int64_t H, int64_t T, int64_t D, int64_t offset = 0, float theta = 10000.f) {
  RopeShape s;
  s.B = B, s.H = H, s.T = T, s.D = D, s.pos_offset = offset, s.theta = theta;
  return s;
}

TEST(Rope, FastMatchesReference) {
  const RopeShape shapes[] = {shape(1, 1, 1, 2), shape(2, 3, 7, 6), shape(1, 2, 33, 66, 5),
                              shape(2, 2, 17, 128, 1000, 500000.f), shape(1, 1, 5, 4098)};
  uint64_t seed = 1;
  for (const RopeShape& s : shapes) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.B << " H=" << s.H << " T=" << s.T << " D=" << s.D);
    const Vec x = random_vector(numel(s), ++seed);
    Vec y(x.size()), y_ref(x.size()), dx(x.size()), dx_ref(x.size());
    rope_fwd(x.data(), y.data(), s);
    ref::rope_fwd(x.data(), y_ref.data(), s);
    rope_bwd(x.data(), dx.data(), s);
    ref::rope_bwd(x.data(), dx_ref.data(), s);
    // Same cos/sin (rounded to f32 from double) and one fma per output: a few ulp of |x| ~ 4.
    EXPECT_TRUE(all_close(y, y_ref, 1e-6f, 1e-6f));
    EXPECT_TRUE(all_close(dx, dx_ref, 1e-6f, 1e-6f));
  }
}

TEST(Rope, RotatesPairsByPositionTimesFrequency) {
  // D = 4: pairs (0,2) with inv_freq 1 and (1,3) with inv_freq theta^-0.5 = 0.01. Position 3.
  const RopeShape s = shape(1, 1, 1, 4, 3);
  const Vec x = {1.f, 2.f, 3.f, 4.f};
  Vec y(4);
  rope_fwd(x.data(), y.data(), s);
  const double a0 = 3.0, a1 = 0.03;
  EXPECT_NEAR(y[0], 1 * std::cos(a0) - 3 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[2], 3 * std::cos(a0) + 1 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[1], 2 * std::cos(a1) - 4 * std::sin(a1), 1e-6);
  EXPECT_NEAR(y[3], 4 * std::cos(a1) + 2 * std::sin(a1), 1e-6);
}

TEST(Rope, InPlaceEqualsOutOfPlace) {
  const RopeShape s = shape(2, 2, 9, 22, 4);
  const Vec x = random_vector(numel(s), 5);
  Vec y(x.size()), inplace = x;
  rope_fwd(x.data(), y.data(), s);
  rope_fwd(inplace.data(), inplace.data(), s);
  EXPECT_EQ(y, inplace);
  rope_bwd(inplace.data(), inplace.data(), s);
  EXPECT_TRUE(all_close(inplace, x, 1e-5f, 1e-6f));  // a rotation and its inverse
}

TEST(Rope, BackwardIsTheAdjointOfForward) {
  // rope is linear, so its gradient is the transpose: <fwd(x), w> == <x, bwd(w)> for all x, w.
  // This is what a finite difference of a linear map measures, without its truncation error.
  const RopeShape s = shape(1, 3, 13, 10, 7);
  const Vec x = random_vector(numel(s), 6), w = random_vector(numel(s), 7);
  Vec y(x.size()), g(x.size());
  rope_fwd(x.data(), y.data(), s);
  rope_bwd(w.data(), g.data(), s);
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < x.size(); ++i) lhs += static_cast<double>(y[i]) * w[i], rhs += static_cast<double>(x[i]) * g[i];
  EXPECT_NEAR(lhs, rhs, 1e-4 * (std::fabs(lhs) + 1.0));
}

TEST(Rope, RejectsOddHeadDim) {
  Vec x(12);
  try {
    rope_fwd(x.data(), x.data(), shape(1, 1, 4, 3));
    FAIL() << "expected acc::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("D=3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rope_bwd(x.data(), x.data(), shape(1, 1, 1, 4, -1)), Error);
}

}  // namespace
}  // namespace acc::kernels
