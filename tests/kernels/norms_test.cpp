// layernorm / rmsnorm: fast vs reference, backward vs finite differences, determinism of the
// parameter-gradient reduction across thread counts, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "acc/kernels/norms.h"
#include "acc/util/error.h"
#include "kernel_checks.h"
#include "support/test_support.h"

namespace acc::kernels {
namespace {

using test::all_close;
using test::random_vector;
using Vec = std::vector<float>;

struct Shape {
  int64_t rows, cols;
};
const Shape kShapes[] = {{1, 1}, {1, 7}, {7, 33}, {33, 768}, {3, 1000}, {2, 4097}, {300, 768}};
constexpr float kEps = 1e-5f;

// Everything one layernorm or rmsnorm fwd+bwd produces, from either implementation.
struct NormRun {
  Vec y, mean, rstd, dx, dgamma, dbeta;
};

struct Inputs {
  Vec x, gamma, beta, dy, dgamma0, dbeta0;
  Inputs(Shape s, uint64_t seed)
      : x(random_vector(s.rows * s.cols, seed, 2.f)),
        gamma(random_vector(s.cols, seed + 1)),
        beta(random_vector(s.cols, seed + 2)),
        dy(random_vector(s.rows * s.cols, seed + 3)),
        dgamma0(random_vector(s.cols, seed + 4)),
        dbeta0(random_vector(s.cols, seed + 5)) {
    for (int64_t i = 0; i < s.rows * s.cols; i += 5) x[static_cast<size_t>(i)] += 3.f;  // a non-zero mean
  }
};

// Runs layernorm (center) or rmsnorm through the fast or reference kernels; gamma/beta optional.
NormRun run(bool use_ref, bool center, Shape s, const Inputs& in, bool affine) {
  const int64_t n = s.rows * s.cols;
  NormRun o{Vec(n), Vec(s.rows), Vec(s.rows), Vec(n), in.dgamma0, in.dbeta0};
  const float* g = affine ? in.gamma.data() : nullptr;
  const float* b = affine ? in.beta.data() : nullptr;
  if (center) {
    (use_ref ? ref::layernorm_fwd : layernorm_fwd)(in.x.data(), g, b, o.y.data(), o.mean.data(),
                                                   o.rstd.data(), s.rows, s.cols, kEps);
    (use_ref ? ref::layernorm_bwd : layernorm_bwd)(in.dy.data(), in.x.data(), g, o.mean.data(),
                                                   o.rstd.data(), o.dx.data(), o.dgamma.data(),
                                                   o.dbeta.data(), s.rows, s.cols);
  } else {
    (use_ref ? ref::rmsnorm_fwd : rmsnorm_fwd)(in.x.data(), g, o.y.data(), o.rstd.data(), s.rows,
                                               s.cols, kEps);
    (use_ref ? ref::rmsnorm_bwd : rmsnorm_bwd)(in.dy.data(), in.x.data(), g, o.rstd.data(),
                                               o.dx.data(), o.dgamma.data(), s.rows, s.cols);
  }
  return o;
}

class NormTest : public ::testing::TestWithParam<bool> {};  // param: layernorm (true) or rmsnorm

TEST_P(NormTest, FastMatchesReference) {
  const bool center = GetParam();
  uint64_t seed = 10;
  for (const Shape s : kShapes)
    for (const bool affine : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "rows=" << s.rows << " cols=" << s.cols << " affine=" << affine);
      const Inputs in(s, seed += 10);
      const NormRun f = run(false, center, s, in, affine), r = run(true, center, s, in, affine);
      // The reference works in double; f32 sums over <= 4097 values stay within ~1e-6 relative,
      // and |y| ~ |gamma| * 4, so these bounds leave a margin of about 10x.
      EXPECT_TRUE(all_close(f.y, r.y, 1e-5f, 2e-5f));
      EXPECT_TRUE(all_close(f.rstd, r.rstd, 1e-5f, 0.f));
      if (center) {
        EXPECT_TRUE(all_close(f.mean, r.mean, 1e-5f, 1e-5f));
      }
      EXPECT_TRUE(all_close(f.dx, r.dx, 1e-4f, 2e-5f));
      // dgamma sums dy*xhat over rows: the error grows with sqrt(rows).
      const float atol = 2e-5f * std::sqrt(static_cast<float>(s.rows));
      EXPECT_TRUE(all_close(f.dgamma, r.dgamma, 1e-5f, atol));
      EXPECT_TRUE(all_close(f.dbeta, r.dbeta, 1e-5f, atol));
    }
}

TEST_P(NormTest, BackwardMatchesFiniteDifferences) {
  const bool center = GetParam();
  const Shape s{3, 7};
  const Inputs in(s, 77);
  // loss = sum(dy * y), so dL/dx = dx and dL/dgamma = dgamma - dgamma0 (bwd accumulates).
  auto fwd_x = [&](const float* x, float* y) {
    Vec mean(s.rows), rstd(s.rows);
    if (center) ref::layernorm_fwd(x, in.gamma.data(), in.beta.data(), y, mean.data(), rstd.data(), s.rows, s.cols, kEps);
    else ref::rmsnorm_fwd(x, in.gamma.data(), y, rstd.data(), s.rows, s.cols, kEps);
  };
  auto fwd_gamma = [&](const float* g, float* y) {
    Vec mean(s.rows), rstd(s.rows);
    if (center) ref::layernorm_fwd(in.x.data(), g, in.beta.data(), y, mean.data(), rstd.data(), s.rows, s.cols, kEps);
    else ref::rmsnorm_fwd(in.x.data(), g, y, rstd.data(), s.rows, s.cols, kEps);
  };
  // The reference forward rounds y to f32 once (rel. 6e-8); with h = 1e-3 and |dy| ~ 1 over 21
  // outputs that is ~1e-4 of noise in the quotient, and the O(h^2) truncation is smaller still.
  const Vec gx = test::fd_grad(in.x, in.dy, fwd_x, 1e-3f);
  const Vec gg = test::fd_grad(in.gamma, in.dy, fwd_gamma, 1e-3f);
  for (const bool use_ref : {false, true}) {
    SCOPED_TRACE(use_ref ? "reference" : "fast");
    NormRun o = run(use_ref, center, s, in, true);
    for (size_t c = 0; c < o.dgamma.size(); ++c) o.dgamma[c] -= in.dgamma0[c];
    EXPECT_TRUE(all_close(o.dx, gx, 2e-3f, 1e-3f));
    EXPECT_TRUE(all_close(o.dgamma, gg, 2e-3f, 1e-3f));
    if (center) {  // dL/dbeta = sum over rows of dy
      for (int64_t c = 0; c < s.cols; ++c) {
        double want = 0;
        for (int64_t r = 0; r < s.rows; ++r) want += in.dy[static_cast<size_t>(r * s.cols + c)];
        EXPECT_NEAR(o.dbeta[static_cast<size_t>(c)] - in.dbeta0[static_cast<size_t>(c)], want, 1e-5);
      }
    }
  }
}

TEST_P(NormTest, ParameterGradientsDoNotDependOnThreadCount) {
  const bool center = GetParam();
  const Shape s{1000, 768};
  const Inputs in(s, 5);
  NormRun one, two;
  {
    test::ScopedThreads t(1);
    one = run(false, center, s, in, true);
  }
  {
    test::ScopedThreads t(2);
    two = run(false, center, s, in, true);
  }
  EXPECT_EQ(one.dgamma, two.dgamma);
  EXPECT_EQ(one.dbeta, two.dbeta);
  EXPECT_EQ(one.dx, two.dx);
  EXPECT_EQ(one.y, two.y);
}

TEST_P(NormTest, NormalisesEachRow) {
  // Without affine parameters a layernorm row has mean 0 and variance 1 (up to eps); an rmsnorm
  // row has mean square 1.
  const bool center = GetParam();
  const Shape s{4, 1000};
  const Inputs in(s, 9);
  const NormRun o = run(false, center, s, in, false);
  for (int64_t r = 0; r < s.rows; ++r) {
    double m = 0, sq = 0;
    for (int64_t c = 0; c < s.cols; ++c) m += o.y[static_cast<size_t>(r * s.cols + c)];
    m /= static_cast<double>(s.cols);
    for (int64_t c = 0; c < s.cols; ++c) {
      const double d = o.y[static_cast<size_t>(r * s.cols + c)] - (center ? m : 0.0);
      sq += d * d;
    }
    if (center) {
      EXPECT_NEAR(m, 0.0, 1e-5);
    }
    EXPECT_NEAR(sq / static_cast<double>(s.cols), 1.0, 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(LayerAndRms, NormTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "layernorm" : "rmsnorm"; });

TEST(Norms, RejectsBadShapes) {
  Vec x(4), y(4), m(2), r(2);
  EXPECT_THROW(layernorm_fwd(x.data(), nullptr, nullptr, y.data(), m.data(), r.data(), 2, 0, kEps), Error);
  EXPECT_THROW(rmsnorm_fwd(x.data(), nullptr, y.data(), r.data(), -1, 2, kEps), Error);
  EXPECT_THROW(layernorm_fwd(x.data(), nullptr, nullptr, y.data(), nullptr, r.data(), 2, 2, kEps), Error);
  try {
    rmsnorm_bwd(x.data(), x.data(), nullptr, r.data(), y.data(), nullptr, 2, -3);
    FAIL() << "expected acc::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rmsnorm_bwd"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cols=-3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace acc::kernels
