// softmax: fast vs reference over odd shapes, rows sum to 1, shift invariance and masking
// (-inf), backward vs finite differences, argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "acc/kernels/softmax.h"
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

TEST(Softmax, FastMatchesReference) {
  const Shape shapes[] = {{1, 1}, {1, 7}, {7, 33}, {33, 768}, {3, 1000}, {2, 4097}, {200, 50}};
  uint64_t seed = 1;
  for (const Shape s : shapes) {
    SCOPED_TRACE(::testing::Message() << "rows=" << s.rows << " cols=" << s.cols);
    const int64_t n = s.rows * s.cols;
    const Vec x = random_vector(n, ++seed, 4.f), dy = random_vector(n, ++seed);
    Vec y(n), y_ref(n), dx(n), dx_ref(n);
    softmax_fwd(x.data(), y.data(), s.rows, s.cols);
    ref::softmax_fwd(x.data(), y_ref.data(), s.rows, s.cols);
    // ~1 ulp exp and an f32 row sum: relative error well under 1e-5.
    EXPECT_TRUE(all_close(y, y_ref, 1e-5f, 1e-9f));
    softmax_bwd(dy.data(), y_ref.data(), dx.data(), s.rows, s.cols);
    ref::softmax_bwd(dy.data(), y_ref.data(), dx_ref.data(), s.rows, s.cols);
    // dx = y (dy - dot): the f32 dot product over up to 4097 terms costs ~1e-6 absolute.
    EXPECT_TRUE(all_close(dx, dx_ref, 1e-4f, 1e-7f));
    for (int64_t r = 0; r < s.rows; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < s.cols; ++c) sum += y[static_cast<size_t>(r * s.cols + c)];
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
}

TEST(Softmax, LargeInputsAndMaskedEntries) {
  // Softmax is shift invariant: +1000 must not overflow; -inf entries get exactly 0.
  const float inf = std::numeric_limits<float>::infinity();
  const Vec x = {1000.f, 1001.f, -inf, 999.f, -inf, -inf, -inf, -inf, -inf, 1000.f, 1000.5f};
  const Vec shifted = {0.f, 1.f, -inf, -1.f, -inf, -inf, -inf, -inf, -inf, 0.f, 0.5f};
  Vec y(x.size()), y_shift(x.size()), y_ref(x.size());
  const auto cols = static_cast<int64_t>(x.size());
  softmax_fwd(x.data(), y.data(), 1, cols);
  softmax_fwd(shifted.data(), y_shift.data(), 1, cols);
  ref::softmax_fwd(shifted.data(), y_ref.data(), 1, cols);
  EXPECT_TRUE(all_close(y, y_ref, 1e-5f, 0.f));
  EXPECT_TRUE(all_close(y_shift, y_ref, 1e-5f, 0.f));
  for (const size_t i : {2u, 4u, 8u}) EXPECT_EQ(y[i], 0.f);
}

TEST(Softmax, BackwardMatchesFiniteDifferences) {
  const Shape s{3, 11};
  const int64_t n = s.rows * s.cols;
  const Vec x = random_vector(n, 41, 2.f), w = random_vector(n, 42);
  // FD of the f32 reference forward with h = 1e-3: output rounding (6e-8 of y <= 1, 11 terms
  // per row) is ~1e-4 of the quotient; truncation O(h^2) is smaller.
  const Vec fd = test::fd_grad(x, w, [&](const float* in, float* out) { ref::softmax_fwd(in, out, s.rows, s.cols); }, 1e-3f);
  Vec y(n), dx(n), dx_ref(n);
  softmax_fwd(x.data(), y.data(), s.rows, s.cols);
  softmax_bwd(w.data(), y.data(), dx.data(), s.rows, s.cols);
  ref::softmax_bwd(w.data(), y.data(), dx_ref.data(), s.rows, s.cols);
  EXPECT_TRUE(all_close(dx, fd, 1e-3f, 5e-4f));
  EXPECT_TRUE(all_close(dx_ref, fd, 1e-3f, 5e-4f));
}

TEST(Softmax, RejectsBadShapes) {
  float x = 0.f;
  EXPECT_THROW(softmax_fwd(&x, &x, 1, 0), Error);
  EXPECT_THROW(softmax_bwd(&x, &x, &x, -1, 1), Error);
}

}  // namespace
}  // namespace acc::kernels
