// transpose32: bit for bit the plain loop on shapes around its 8 x 16 tiling, with strides
// wider than the matrix (the cells between rows are left alone) and NaN payloads kept.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "acc/kernels/transpose.h"

namespace acc::kernels {
namespace {

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

TEST(Transpose32, MatchesThePlainLoopBitwise) {
  for (const int64_t rows : {1, 7, 8, 9, 16, 23, 64, 131})
    for (const int64_t cols : {1, 8, 15, 16, 17, 33, 48, 100}) {
      SCOPED_TRACE(::testing::Message() << rows << " x " << cols);
      const int64_t in_stride = cols + 3, out_stride = rows + 5;
      std::vector<float> in(static_cast<size_t>(rows * in_stride));
      for (size_t i = 0; i < in.size(); ++i) {
        const uint32_t u = 0x7fa00000u + static_cast<uint32_t>(i);  // NaNs with distinct payloads
        std::memcpy(&in[i], &u, 4);
      }
      std::vector<float> fast(static_cast<size_t>(cols * out_stride), -1.f), plain = fast;
      transpose32(in.data(), in_stride, fast.data(), out_stride, rows, cols);
      ref::transpose32(in.data(), in_stride, plain.data(), out_stride, rows, cols);
      ASSERT_EQ(bits(fast), bits(plain));
    }
}

TEST(Transpose32, ReferenceIsATranspose) {
  const std::vector<float> in = {1, 2, 3, 4, 5, 6};  // 2 x 3
  std::vector<float> out(6);
  ref::transpose32(in.data(), 3, out.data(), 2, 2, 3);
  EXPECT_EQ(out, (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

}  // namespace
}  // namespace acc::kernels
