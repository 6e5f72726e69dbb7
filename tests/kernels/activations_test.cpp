// gelu / silu / swiglu: fast vs reference (including saturated and special inputs), backward vs
// finite differences, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "acc/kernels/activations.h"
#include "acc/util/error.h"
#include "kernel_checks.h"
#include "support/test_support.h"

namespace acc::kernels {
namespace {

using test::all_close;
using test::random_vector;
using Vec = std::vector<float>;

const int64_t kSizes[] = {1, 7, 33, 768, 1000, 4097, 100003};

// Random values of spread 3, with saturating and special values placed at the start so they also
// land in the masked tail for the smallest sizes.
Vec inputs(int64_t n, uint64_t seed) {
  Vec x = random_vector(n, seed, 3.f);
  const float special[] = {0.f, -0.f, 40.f, -40.f, 100.f, -100.f, 1e-20f, -0.75f, 88.f, -90.f};
  for (size_t i = 0; i < std::size(special) && i < x.size(); ++i) x[x.size() - 1 - i] = special[i];
  return x;
}

// The fast kernels use a ~1 ulp vector exp and f32 arithmetic; the references are double. 1e-5
// relative plus 1e-6 absolute (for outputs that cancel to ~0, e.g. gelu' near x = -0.75) is
// about 10x the worst error seen.
constexpr float kRtol = 1e-5f, kAtol = 1e-6f;

using Unary = void (*)(const float*, float*, int64_t);
using UnaryBwd = void (*)(const float*, const float*, float*, int64_t);

struct UnaryCase {
  const char* name;
  Unary fwd, fwd_ref;
  UnaryBwd bwd, bwd_ref;
};
const UnaryCase kUnary[] = {{"gelu", gelu_fwd, ref::gelu_fwd, gelu_bwd, ref::gelu_bwd},
                            {"silu", silu_fwd, ref::silu_fwd, silu_bwd, ref::silu_bwd}};

TEST(Activations, UnaryFastMatchesReference) {
  for (const UnaryCase& k : kUnary)
    for (const int64_t n : kSizes) {
      SCOPED_TRACE(::testing::Message() << k.name << " n=" << n);
      const Vec x = inputs(n, static_cast<uint64_t>(n)), dy = random_vector(n, 3);
      Vec y(n), y_ref(n), dx(n), dx_ref(n);
      k.fwd(x.data(), y.data(), n);
      k.fwd_ref(x.data(), y_ref.data(), n);
      k.bwd(dy.data(), x.data(), dx.data(), n);
      k.bwd_ref(dy.data(), x.data(), dx_ref.data(), n);
      EXPECT_TRUE(all_close(y, y_ref, kRtol, kAtol));
      EXPECT_TRUE(all_close(dx, dx_ref, kRtol, kAtol));
    }
}

TEST(Activations, KnownValues) {
  // gelu_new(1) = 0.5 (1 + tanh(sqrt(2/pi) 1.044715)) = 0.8411920; silu(1) = 1/(1+e^-1).
  const float x[2] = {1.f, -2.f};
  float y[2];
  gelu_fwd(x, y, 2);
  EXPECT_NEAR(y[0], 0.841192f, 1e-6f);
  EXPECT_NEAR(y[1], -0.0454023f, 1e-6f);
  silu_fwd(x, y, 2);
  EXPECT_NEAR(y[0], 0.7310586f, 1e-6f);
  EXPECT_NEAR(y[1], -0.2384058f, 1e-6f);
}

TEST(Activations, NanPropagates) {
  const float x[3] = {std::numeric_limits<float>::quiet_NaN(), 1.f, 2.f};
  float y[3];
  gelu_fwd(x, y, 3);
  EXPECT_TRUE(std::isnan(y[0]));
  silu_fwd(x, y, 3);
  EXPECT_TRUE(std::isnan(y[0]));
}

TEST(Activations, SwigluFastMatchesReference) {
  for (const int64_t n : kSizes) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const Vec g = inputs(n, 11), u = random_vector(n, 12), dy = random_vector(n, 13);
    Vec y(n), y_ref(n), dg(n), dg_ref(n), du(n), du_ref(n);
    swiglu_fwd(g.data(), u.data(), y.data(), n);
    ref::swiglu_fwd(g.data(), u.data(), y_ref.data(), n);
    swiglu_bwd(dy.data(), g.data(), u.data(), dg.data(), du.data(), n);
    ref::swiglu_bwd(dy.data(), g.data(), u.data(), dg_ref.data(), du_ref.data(), n);
    EXPECT_TRUE(all_close(y, y_ref, kRtol, kAtol));
    EXPECT_TRUE(all_close(dg, dg_ref, kRtol, kAtol));
    EXPECT_TRUE(all_close(du, du_ref, kRtol, kAtol));
  }
}

// Element-wise ops: FD of the f32 reference forward. h = 1e-2 keeps the f32 output rounding
// (~6e-8 |y|) at ~1e-5 of the quotient; the O(h^2 f''') truncation is < 1e-4 for these smooth
// functions of inputs ~N(0, 2). 1e-3 tolerances still catch any wrong term of a derivative.
constexpr float kFdH = 1e-2f, kFdTol = 1e-3f;

TEST(Activations, UnaryBackwardMatchesFiniteDifferences) {
  const int64_t n = 37;
  for (const UnaryCase& k : kUnary) {
    SCOPED_TRACE(k.name);
    const Vec x = random_vector(n, 21, 2.f), w = random_vector(n, 22);
    // Element-wise: perturbing x_i moves only y_i, so a per-element loss weight gives dy = w.
    const Vec fd = test::fd_grad(x, w, [&](const float* in, float* out) { k.fwd_ref(in, out, n); }, kFdH);
    Vec dx(n), dx_ref(n);
    k.bwd(w.data(), x.data(), dx.data(), n);
    k.bwd_ref(w.data(), x.data(), dx_ref.data(), n);
    EXPECT_TRUE(all_close(dx, fd, kFdTol, kFdTol));
    EXPECT_TRUE(all_close(dx_ref, fd, kFdTol, kFdTol));
  }
}

TEST(Activations, SwigluBackwardMatchesFiniteDifferences) {
  const int64_t n = 37;
  const Vec g = random_vector(n, 31, 2.f), u = random_vector(n, 32), w = random_vector(n, 33);
  const Vec fd_g = test::fd_grad(g, w, [&](const float* in, float* out) { ref::swiglu_fwd(in, u.data(), out, n); }, kFdH);
  const Vec fd_u = test::fd_grad(u, w, [&](const float* in, float* out) { ref::swiglu_fwd(g.data(), in, out, n); }, kFdH);
  for (const bool use_ref : {false, true}) {
    SCOPED_TRACE(use_ref ? "reference" : "fast");
    Vec dg(n), du(n);
    (use_ref ? ref::swiglu_bwd : swiglu_bwd)(w.data(), g.data(), u.data(), dg.data(), du.data(), n);
    EXPECT_TRUE(all_close(dg, fd_g, kFdTol, kFdTol));
    EXPECT_TRUE(all_close(du, fd_u, kFdTol, kFdTol));
  }
}

TEST(Activations, EmptyInputIsANoOp) {
  float x = 5.f, y = 7.f;
  gelu_fwd(&x, &y, 0);
  swiglu_fwd(&x, &x, &y, 0);
  EXPECT_EQ(y, 7.f);
}

TEST(Activations, RejectsNegativeCount) {
  float x = 0.f;
  EXPECT_THROW(gelu_fwd(&x, &x, -1), Error);
  EXPECT_THROW(swiglu_bwd(&x, &x, &x, &x, &x, -5), Error);
}

}  // namespace
}  // namespace acc::kernels
