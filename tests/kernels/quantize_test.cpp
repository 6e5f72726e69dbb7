// Block-wise int8 and int4 quantization (ZeRO++'s qwZ/qgZ wire format): the vector kernels
// (AVX-512 or, under test_kernels_avx2, AVX2) agree bit for bit with the scalar reference on
// block tails, zero blocks and outliers; each element comes back within half its block's scale;
// ties round to even; int4 packs element 2i in the low nibble of byte i.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "acc/kernels/convert.h"
#include "acc/kernels/quantize.h"
#include "acc/util/error.h"
#include "support/test_support.h"

namespace acc::kernels {
namespace {

std::vector<float> data(int64_t n, int64_t block) {
  std::vector<float> x = test::random_vector(n, static_cast<uint64_t>(n + block), 100.f);
  if (n > block) std::fill(x.begin(), x.begin() + block, 0.f);  // a block of zeros
  x[static_cast<size_t>(n / 2)] = 3e4f;                        // an outlier sets its block's scale
  return x;
}

TEST(Quantize, KnownBlock) {
  const std::vector<float> x{1.f, -2.f, 0.5f, 0.f};
  std::vector<int8_t> q(4);
  float scale = 0;
  quantize_int8(x.data(), 4, kQuantBlock, q.data(), &scale);
  EXPECT_EQ(scale, 2.f / 127.f);
  // 1 * 127/2 = 63.5 rounds to the even 64; 0.5 * 63.5 = 31.75 to 32.
  EXPECT_EQ(q, (std::vector<int8_t>{64, -127, 32, 0}));
}

// Exact ties in the vector bodies (32 elements: both AVX-512 and AVX2 loops run): with a block
// maximum of 127 the factor is 1, so k + 0.5 rounds to the even neighbour. A block of tiny
// values is flushed to zeros instead of overflowing 127 / max.
TEST(Quantize, TiesRoundToEvenAndTinyBlocksFlush) {
  std::vector<float> x(64);
  x[0] = 127.f;
  for (int i = 1; i < 32; ++i) x[i] = static_cast<float>((i % 7) - 3) + 0.5f;  // -2.5 .. 3.5, all ties
  for (int i = 32; i < 64; ++i) x[i] = (i % 2 ? 1e-38f : -3e-35f);
  std::vector<int8_t> q(64), q_ref(64);
  std::vector<float> s(2), s_ref(2);
  quantize_int8(x.data(), 64, 32, q.data(), s.data());
  ref::quantize_int8(x.data(), 64, 32, q_ref.data(), s_ref.data());
  EXPECT_EQ(q, q_ref);
  EXPECT_EQ(s, s_ref);
  EXPECT_EQ(s[0], 1.f);
  for (int i = 1; i < 32; ++i) EXPECT_EQ(q[i], static_cast<int8_t>(std::nearbyint(x[i]))) << x[i];
  // x[1..7] = -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -2.5
  EXPECT_EQ((std::vector<int8_t>(q.begin() + 1, q.begin() + 8)), (std::vector<int8_t>{-2, 0, 0, 2, 2, 4, -2}));
  EXPECT_EQ(s[1], 0.f);
  for (int i = 32; i < 64; ++i) EXPECT_EQ(q[i], 0);
}

TEST(Quantize, FastMatchesReferenceBitwise) {
  for (const int64_t block : {kQuantBlock, int64_t{64}, int64_t{100}})
    for (const int64_t n : {1, 7, 255, 256, 257, 1000, 4097, (1 << 17) + 3}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " block=" << block);
      const std::vector<float> x = data(n, block);
      const int64_t blocks = quant_blocks(n, block);
      std::vector<int8_t> q(n), q_ref(n);
      std::vector<float> s(blocks), s_ref(blocks);
      quantize_int8(x.data(), n, block, q.data(), s.data());
      ref::quantize_int8(x.data(), n, block, q_ref.data(), s_ref.data());
      ASSERT_EQ(q, q_ref);
      ASSERT_EQ(0, std::memcmp(s.data(), s_ref.data(), static_cast<size_t>(blocks) * 4));
      std::vector<float> back(n), back_ref(n);
      dequantize_int8(q.data(), s.data(), n, block, back.data());
      ref::dequantize_int8(q.data(), s.data(), n, block, back_ref.data());
      ASSERT_EQ(0, std::memcmp(back.data(), back_ref.data(), static_cast<size_t>(n) * 4));
      // Into bf16: the f32 values rounded once.
      std::vector<bfloat16> b(n);
      dequantize_int8(q.data(), s.data(), n, block, b.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(b[i].bits, to_bf16(back_ref[i]).bits) << "index " << i;
    }
}

TEST(Quantize, EachElementComesBackWithinHalfItsBlocksScale) {
  const int64_t n = 10000, block = kQuantBlock;
  const std::vector<float> x = data(n, block);
  std::vector<int8_t> q(n);
  std::vector<float> s(quant_blocks(n, block)), back(n);
  quantize_int8(x.data(), n, block, q.data(), s.data());
  dequantize_int8(q.data(), s.data(), n, block, back.data());
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float scale = s[i / block];
    ASSERT_LE(std::abs(q[i]), 127);
    // Half a step, plus the f32 rounding of x * (127 / max) and of q * scale.
    ASSERT_LE(std::fabs(x[i] - back[i]), scale * (0.5f + 1e-4f)) << "index " << i;
    if (scale > 0) worst = std::max(worst, static_cast<double>(std::fabs(x[i] - back[i]) / scale));
  }
  EXPECT_GT(worst, 0.4);  // the bound is reached, not loose
  for (int64_t i = 0; i < block; ++i) ASSERT_EQ(back[i], 0.f);  // the zero block
  EXPECT_EQ(s[0], 0.f);
}

TEST(Quantize, Int4KnownBlockPacksTwoValuesAByte) {
  const std::vector<float> x{1.f, -2.f, 0.5f, 0.f, 0.75f};
  std::vector<uint8_t> packed(3);
  float scale = 0;
  quantize_int4(x.data(), 5, 16, packed.data(), &scale);
  EXPECT_EQ(scale, 2.f / 7.f);
  // x * 7/2: 3.5 -> 4 (even), -7, 1.75 -> 2, 0, 2.625 -> 3; -7 is 0x9 as a nibble.
  EXPECT_EQ(packed, (std::vector<uint8_t>{0x94, 0x02, 0x03}));
  std::vector<float> back(5);
  dequantize_int4(packed.data(), &scale, 5, 16, back.data());
  EXPECT_EQ(back, (std::vector<float>{4 * scale, -7 * scale, 2 * scale, 0.f, 3 * scale}));
}

TEST(Quantize, Int4FastMatchesReferenceBitwise) {
  for (const int64_t block : {kQuantBlock, int64_t{64}, int64_t{100}, int64_t{1000}})
    for (const int64_t n : {1, 7, 255, 256, 257, 1000, 4097, (1 << 17) + 3}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " block=" << block);
      const std::vector<float> x = data(n, block);
      const int64_t blocks = quant_blocks(n, block), bytes = (n + 1) / 2;
      std::vector<uint8_t> q(bytes), q_ref(bytes);
      std::vector<float> s(blocks), s_ref(blocks);
      quantize_int4(x.data(), n, block, q.data(), s.data());
      ref::quantize_int4(x.data(), n, block, q_ref.data(), s_ref.data());
      ASSERT_EQ(q, q_ref);
      ASSERT_EQ(0, std::memcmp(s.data(), s_ref.data(), static_cast<size_t>(blocks) * 4));
      std::vector<float> back(n), back_ref(n);
      dequantize_int4(q.data(), s.data(), n, block, back.data());
      ref::dequantize_int4(q.data(), s.data(), n, block, back_ref.data());
      ASSERT_EQ(0, std::memcmp(back.data(), back_ref.data(), static_cast<size_t>(n) * 4));
      // Within half a step (max |x| / 7) of its block.
      for (int64_t i = 0; i < n; ++i)
        ASSERT_LE(std::fabs(x[i] - back[i]), s[i / block] * (0.5f + 1e-4f)) << "index " << i;
    }
}

TEST(Quantize, Int4NeedsAnEvenBlock) {
  const std::vector<float> x(8, 1.f);
  std::vector<uint8_t> packed(4);
  std::vector<float> s(2);
  acc::test::expect_contains(acc::test::error_of([&] { quantize_int4(x.data(), 8, 5, packed.data(), s.data()); }),
                             {"an int4 block must be a positive even number of elements (two values share a byte), "
                              "got 5"});
}

// A message is the values then the scales, whole words: what quantize_int8 (int4) makes, laid
// out for a collective to send.
TEST(Quantize, MessagesHoldValuesThenScales) {
  for (const int64_t n : {1, 5, 256, 1001}) {
    const int64_t block = 64, bytes = quantized_message_bytes(n, block, 8);
    EXPECT_EQ(bytes, (n + 3) / 4 * 4 + 4 * quant_blocks(n, block)) << n;
    const std::vector<float> x = data(n, block);
    std::vector<int32_t> message(static_cast<size_t>(bytes / 4));
    quantize_message(x.data(), n, block, 8, message.data());
    std::vector<int8_t> q(n);
    std::vector<float> s(quant_blocks(n, block));
    ref::quantize_int8(x.data(), n, block, q.data(), s.data());
    const auto* bytes_of = reinterpret_cast<const char*>(message.data());
    EXPECT_EQ(0, std::memcmp(bytes_of, q.data(), static_cast<size_t>(n))) << n;
    EXPECT_EQ(0, std::memcmp(bytes_of + (n + 3) / 4 * 4, s.data(), s.size() * 4)) << n;
    std::vector<float> back(n), back_ref(n);
    dequantize_message(message.data(), n, block, 8, back.data());
    ref::dequantize_int8(q.data(), s.data(), n, block, back_ref.data());
    EXPECT_EQ(back, back_ref) << n;
  }
}

TEST(Quantize, Int4MessagesHoldPackedValuesThenScales) {
  for (const int64_t n : {1, 5, 256, 1001}) {
    const int64_t block = 64, bytes = quantized_message_bytes(n, block, 4), values = ((n + 1) / 2 + 3) / 4 * 4;
    EXPECT_EQ(bytes, values + 4 * quant_blocks(n, block)) << n;
    const std::vector<float> x = data(n, block);
    std::vector<int32_t> message(static_cast<size_t>(bytes / 4));
    quantize_message(x.data(), n, block, 4, message.data());
    std::vector<uint8_t> q((n + 1) / 2);
    std::vector<float> s(quant_blocks(n, block));
    ref::quantize_int4(x.data(), n, block, q.data(), s.data());
    const auto* bytes_of = reinterpret_cast<const char*>(message.data());
    EXPECT_EQ(0, std::memcmp(bytes_of, q.data(), q.size())) << n;
    EXPECT_EQ(0, std::memcmp(bytes_of + values, s.data(), s.size() * 4)) << n;
    std::vector<float> back(n), back_ref(n);
    dequantize_message(message.data(), n, block, 4, back.data());
    ref::dequantize_int4(q.data(), s.data(), n, block, back_ref.data());
    EXPECT_EQ(back, back_ref) << n;
  }
}

}  // namespace
}  // namespace acc::kernels
