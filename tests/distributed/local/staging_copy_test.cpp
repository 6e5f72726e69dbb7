#include "acc/distributed/staging_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

using acc::dist::StagingCopy;

namespace {

constexpr size_t kTimed = StagingCopy::kTimedBytes;
// Seconds that make `bytes` a copy at half / twice the slow threshold.
double slow_seconds(size_t bytes) { return 2.0 * static_cast<double>(bytes) / StagingCopy::kSlowBytesPerSecond; }
double fast_seconds(size_t bytes) { return 0.5 * static_cast<double>(bytes) / StagingCopy::kSlowBytesPerSecond; }

enum class Keep { none, plain, streaming };

// Copies `bytes` from a patterned source to destinations offset by `offset` bytes (so the
// streaming path meets unaligned heads and tails), with or without a kept second copy, and
// checks every byte and the guards on both sides of each destination.
void expect_copies(StagingCopy& copy, size_t bytes, size_t offset, Keep keep) {
  std::vector<uint8_t> src(bytes), dst(bytes + offset + 1, 0xee), kept(bytes + 2 * offset + 1, 0xdd);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  copy(dst.data() + offset, src.data(), bytes, keep == Keep::none ? nullptr : kept.data() + 2 * offset,
       keep == Keep::streaming);
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(dst[offset + i], src[i]) << "byte " << i << " of " << bytes;
  for (size_t i = 0; i < offset; ++i) ASSERT_EQ(dst[i], 0xee) << "wrote before the destination";
  ASSERT_EQ(dst[offset + bytes], 0xee) << "wrote past the destination";
  for (size_t i = 0; i < kept.size(); ++i) {
    const bool inside = keep != Keep::none && i >= 2 * offset && i < 2 * offset + bytes;
    ASSERT_EQ(kept[i], inside ? src[i - 2 * offset] : 0xdd) << "kept byte " << i << " of " << bytes;
  }
}

TEST(StagingCopy, CopiesEveryByteWithPlainAndStreamingStores) {
  for (const bool streaming : {false, true}) {
    for (const Keep keep : {Keep::none, Keep::plain, Keep::streaming}) {
      for (const size_t bytes : {size_t{0}, size_t{1}, size_t{63}, kTimed - 1, kTimed, kTimed + 13, 3 * kTimed + 5}) {
        for (const size_t offset : {size_t{0}, size_t{1}, size_t{31}}) {
          StagingCopy copy;
          if (streaming) copy.record_plain(kTimed, slow_seconds(kTimed));
          ASSERT_EQ(copy.streaming(), streaming);
          expect_copies(copy, bytes, offset, keep);
        }
      }
    }
  }
}

TEST(StagingCopy, PlainStoresUntilAPlainCopyIsSlow) {
  StagingCopy copy;
  EXPECT_FALSE(copy.streaming());
  copy.record_plain(size_t{1} << 20, fast_seconds(size_t{1} << 20));
  EXPECT_FALSE(copy.streaming()) << "a fast copy must keep plain stores";
  copy.record_plain(kTimed - 1, slow_seconds(kTimed - 1));
  EXPECT_FALSE(copy.streaming()) << "copies below kTimedBytes are not judged";
  copy.record_plain(size_t{1} << 20, slow_seconds(size_t{1} << 20));
  EXPECT_TRUE(copy.streaming()) << "a slow plain copy must switch to streaming stores";
}

TEST(StagingCopy, TriesPlainStoresAgainAfterKStreamingCopies) {
  StagingCopy copy;
  copy.record_plain(kTimed, slow_seconds(kTimed));
  std::vector<char> src(kTimed, 1), dst(kTimed);
  for (int i = 0; i < 10; ++i) copy(dst.data(), src.data(), kTimed - 1);  // untimed: no count
  for (int i = 0; i < StagingCopy::kStreamingCopies; ++i) {
    ASSERT_TRUE(copy.streaming()) << "after " << i << " streaming copies";
    copy(dst.data(), src.data(), kTimed);
  }
  EXPECT_FALSE(copy.streaming());
}

}  // namespace
