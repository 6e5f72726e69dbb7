// f32 <-> bf16: the vector kernels agree bit for bit with the scalar definition, including
// rounding ties, NaN, infinities, signed zero and subnormals, on odd and parallel-sized inputs.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "acc/kernels/convert.h"
#include "support/test_support.h"

namespace acc::kernels {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<float> special_values() {
  return {0.f, -0.f, 1.f, -1.f, std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
          from_bits(0x7f800001u),  // signalling NaN: must come out quiet
          from_bits(0x3f808000u),  // tie, even below: rounds down to 0x3f80
          from_bits(0x3f818000u),  // tie, odd below: rounds up to 0x3f82
          from_bits(0x3f80ffffu), from_bits(0x00000001u), from_bits(0x807fffffu),
          std::numeric_limits<float>::max(), from_bits(0x7f7f8000u) /* rounds to inf */};
}

TEST(Convert, KnownRoundings) {
  EXPECT_EQ(to_bf16(from_bits(0x3f808000u)).bits, 0x3f80);
  EXPECT_EQ(to_bf16(from_bits(0x3f818000u)).bits, 0x3f82);
  EXPECT_EQ(to_bf16(from_bits(0x7f7f8000u)).bits, 0x7f80);
  EXPECT_EQ(to_bf16(from_bits(0x7f800001u)).bits & 0x7fc0, 0x7fc0);
}

TEST(Convert, FastMatchesReferenceBitwise) {
  for (const int64_t n : {1, 7, 15, 33, 768, 1000, 4097, (1 << 17) + 3}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    std::vector<float> x = test::random_vector(n, static_cast<uint64_t>(n), 100.f);
    const std::vector<float> special = special_values();
    // Specials at both ends: the vector body and the scalar tail both see them.
    for (size_t i = 0; i < special.size() && i < x.size(); ++i) {
      x[i] = special[i];
      x[x.size() - 1 - i] = special[i];
    }
    std::vector<bfloat16> b(n), b_ref(n);
    f32_to_bf16(x.data(), b.data(), n);
    ref::f32_to_bf16(x.data(), b_ref.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(b[i].bits, b_ref[i].bits) << "index " << i;
    std::vector<float> back(n), back_ref(n);
    bf16_to_f32(b.data(), back.data(), n);
    ref::bf16_to_f32(b.data(), back_ref.data(), n);
    ASSERT_EQ(0, std::memcmp(back.data(), back_ref.data(), static_cast<size_t>(n) * 4));
  }
}

}  // namespace
}  // namespace acc::kernels
