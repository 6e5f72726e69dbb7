// detail::exp256 / sigmoid256 (shared by activations, softmax, cross-entropy and attention):
// accuracy against double std::exp across the whole f32 range, and the special cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "acc/kernels/detail/avx2_math.h"

namespace acc::kernels {
namespace {

std::vector<float> map_lanes(__m256 (*fn)(__m256), const std::vector<float>& x) {
  std::vector<float> y(x.size());
  detail::for_each_lanes(static_cast<int64_t>(x.size()), [&](int64_t i, const detail::Lanes& l) {
    l.store(y.data() + i, fn(l.load(x.data() + i)));
  });
  return y;
}

TEST(Avx2Math, ExpIsAccurateOverTheNormalRange) {
  std::vector<float> x;
  for (double v = -87.33; v <= 88.72; v += 1.3e-4) x.push_back(static_cast<float>(v));
  const std::vector<float> y = map_lanes(detail::exp256, x);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(x[i]));
    worst = std::max(worst, std::fabs(y[i] - want) / want);
  }
  // Cephes' polynomial is good to ~1 ulp (6e-8); 2e-7 is ~3 ulp.
  EXPECT_LT(worst, 2e-7) << "worst relative error over " << x.size() << " points";
}

TEST(Avx2Math, ExpSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {-inf, -1000.f, -87.5f, 0.f, -0.f, 88.8f, 1000.f, inf, nan};
  const std::vector<float> y = map_lanes(detail::exp256, x);
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], 0.f);
  EXPECT_EQ(y[2], 0.f);  // below ln(FLT_MIN): flushed rather than denormal
  EXPECT_EQ(y[3], 1.f);
  EXPECT_EQ(y[4], 1.f);
  EXPECT_EQ(y[5], inf);
  EXPECT_EQ(y[6], inf);
  EXPECT_EQ(y[7], inf);
  EXPECT_TRUE(std::isnan(y[8]));
}

TEST(Avx2Math, SigmoidIsAccurateAndSaturates) {
  std::vector<float> x;
  for (double v = -30; v <= 30; v += 1e-3) x.push_back(static_cast<float>(v));
  x.insert(x.end(), {-1e30f, 1e30f, -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity()});
  const std::vector<float> y = map_lanes(detail::sigmoid256, x);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(x[i])));
    ASSERT_NEAR(y[i], want, 3e-7 * want) << "x=" << x[i];
  }
}

TEST(Avx2Math, ReductionsAndTailMask) {
  const __m256 v = _mm256_setr_ps(1, -2, 3, 4, 5, 6, 7.5f, -8);
  EXPECT_EQ(detail::hsum(v), 16.5f);
  EXPECT_EQ(detail::hmax(v), 7.5f);
  alignas(32) int32_t m[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(m), detail::tail_mask(3));
  for (int k = 0; k < 8; ++k) EXPECT_EQ(m[k], k < 3 ? -1 : 0) << k;
}

}  // namespace
}  // namespace acc::kernels
