// exp512 against exp256, lane for lane: the AVX-512 and AVX2 bodies of a kernel must agree bit
// for bit on every value, special ones included, so the path a CPU takes never changes results
// beyond the order of sums. Skipped on CPUs without AVX-512F.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "acc/kernels/detail/avx2_math.h"
#include "acc/kernels/detail/avx512_math.h"
#include "support/test_support.h"

namespace acc::kernels {
namespace {

// GCC 12's intrinsics headers trip its uninitialised-value warnings (see cross_entropy.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) void exp512_of(const float* x, float* y) {
  _mm512_storeu_ps(y, detail::exp512(_mm512_loadu_ps(x)));
}
#pragma GCC diagnostic pop

TEST(Avx512Math, ExpMatchesExp256BitForBit) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512F on this CPU";
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = test::random_vector(4096, 3, 100.f);  // beyond both clamps
  for (float v : {0.f, -0.f, 1.f, -87.4f, -87.3f, 88.7f, 88.8f, inf, -inf,
                  std::numeric_limits<float>::quiet_NaN(), 1e-30f, -1e-30f, 0.5f, -0.5f, 10.f, -10.f})
    x.push_back(v);
  x.resize((x.size() + 15) / 16 * 16, 2.f);
  std::vector<float> want(x.size()), got(x.size());
  for (size_t i = 0; i < x.size(); i += 8)
    _mm256_storeu_ps(want.data() + i, detail::exp256(_mm256_loadu_ps(x.data() + i)));
  for (size_t i = 0; i < x.size(); i += 16) exp512_of(x.data() + i, got.data() + i);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
        << "exp(" << x[i] << "): exp512 " << got[i] << ", exp256 " << want[i];
}

TEST(Avx512Math, TailMaskSelectsTheFirstLanes) {
  EXPECT_EQ(detail::tail_mask16(0), 0);
  EXPECT_EQ(detail::tail_mask16(3), 0b111);
  EXPECT_EQ(detail::tail_mask16(16), 0xffff);
}

}  // namespace
}  // namespace acc::kernels
