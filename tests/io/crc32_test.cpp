// io::crc32 (ISA-L's folding CRC) against zlib's crc32, the reference the checkpoint format and
// its Python reader use: every length up to a few folds, odd alignments, large buffers, and
// continuing from an earlier CRC; and two runs' CRCs combined into that of both end to end.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <random>
#include <vector>

#include "acc/io/safetensors.h"

namespace {

uint32_t zlib_crc(const unsigned char* p, size_t n, uint32_t crc = 0) {
  return static_cast<uint32_t>(::crc32(crc, p, static_cast<uInt>(n)));
}

std::vector<unsigned char> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<unsigned char> out(n);
  for (auto& b : out) b = static_cast<unsigned char>(gen());
  return out;
}

TEST(Crc32, CheckValue) {
  const char* text = "123456789";  // the catalogue's check input for CRC-32/ISO-HDLC
  EXPECT_EQ(acc::io::crc32(text, 9), 0xCBF43926u);
  EXPECT_EQ(acc::io::crc32(text, 0), 0u);
}

TEST(Crc32, EqualsZlibForEveryLengthAndAlignment) {
  const auto bytes = random_bytes(4096 + 64, 1);
  for (size_t offset = 0; offset < 8; ++offset)
    for (size_t n = 0; n <= 1100; n += (n < 300 ? 1 : 37))
      ASSERT_EQ(acc::io::crc32(bytes.data() + offset, n), zlib_crc(bytes.data() + offset, n))
          << "offset " << offset << ", " << n << " bytes";
}

TEST(Crc32, EqualsZlibOnLargeBuffersAndContinues) {
  const auto bytes = random_bytes((size_t{9} << 20) + 13, 2);
  const uint32_t whole = zlib_crc(bytes.data(), bytes.size());
  EXPECT_EQ(acc::io::crc32(bytes.data(), bytes.size()), whole);
  for (size_t split : {size_t{1}, size_t{63}, size_t{4} << 20, bytes.size() - 5}) {
    const uint32_t first = acc::io::crc32(bytes.data(), split);
    EXPECT_EQ(acc::io::crc32(bytes.data() + split, bytes.size() - split, first), whole) << "split at " << split;
  }
}

TEST(Crc32, CombinedEqualsTheWholeRunsCrc) {
  const auto bytes = random_bytes((size_t{3} << 20) + 7, 3);
  const uint32_t whole = zlib_crc(bytes.data(), bytes.size());
  for (size_t split : {size_t{0}, size_t{1}, size_t{4096}, size_t{1} << 20, bytes.size() - 1, bytes.size()}) {
    const uint32_t first = acc::io::crc32(bytes.data(), split);
    const uint32_t second = acc::io::crc32(bytes.data() + split, bytes.size() - split);
    EXPECT_EQ(acc::io::combine_crc32(first, second, bytes.size() - split), whole) << "split at " << split;
  }
  // Three runs, folded left to right as a load folds its parts.
  const size_t a = 1000, b = 2 << 20;
  uint32_t folded = acc::io::combine_crc32(0, acc::io::crc32(bytes.data(), a), a);
  folded = acc::io::combine_crc32(folded, acc::io::crc32(bytes.data() + a, b), b);
  folded = acc::io::combine_crc32(folded, acc::io::crc32(bytes.data() + a + b, bytes.size() - a - b), bytes.size() - a - b);
  EXPECT_EQ(folded, whole);
}

}  // namespace
