// checkpoint::SharedCheck on one rank: which pieces the reads' runs cover (runs that chain end
// to end, duplicates beside them) and which are left to be read whole (a gap, runs that do not
// chain, an empty piece); and the comparison of the sums: right sums pass, a wrong sum or a
// duplicate that sums differently fails naming the entry, and nothing is compared once a
// rank's reading failed. tests/distributed/checkpoint covers several ranks.
#include "acc/checkpoint/shared_check.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "acc/distributed/single_process_group.h"
#include "acc/io/safetensors.h"
#include "acc/util/error.h"

namespace {

using acc::checkpoint::PieceRecord;
using acc::checkpoint::SharedCheck;

uint32_t crc_of(const std::vector<float>& v, int64_t first, int64_t end) {
  return acc::io::crc32(v.data() + first, static_cast<size_t>(end - first) * sizeof(float));
}

TEST(SharedCheck, ChainedRunsCoverAPieceAndTheirSumsMakeItsChecksum) {
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> data(100);
  for (float& x : data) x = uniform(gen);
  const uint32_t whole = crc_of(data, 0, 100);
  const PieceRecord halves{"f", "halves", 0, 100, whole}, gap{"f", "gap", 0, 100, whole},
      unchained{"f", "unchained", 0, 100, whole}, empty{"f", "empty", 0, 0, 0}, twice{"f", "twice", 0, 100, whole};
  const std::vector<const PieceRecord*> pieces = {&halves, &gap, &unchained, &empty, &twice};
  // One optional run per read, as load_state passes them.
  const std::vector<std::optional<SharedCheck::Run>> runs = {
      SharedCheck::Run{&halves, 0, 50},     SharedCheck::Run{&halves, 50, 100},  // 0, 1: chain
      SharedCheck::Run{&gap, 0, 40},        SharedCheck::Run{&gap, 50, 100},     // 2, 3: a gap
      SharedCheck::Run{&unchained, 0, 60},  SharedCheck::Run{&unchained, 0, 50},  // 4, 5, 6: the
      SharedCheck::Run{&unchained, 50, 100},                                      // longest first
      SharedCheck::Run{&twice, 0, 100},     SharedCheck::Run{&twice, 0, 100},     // 7, 8: the same
      std::nullopt};                                                              // 9: no run
  acc::dist::SingleProcessGroup group;
  const SharedCheck check(group, pieces, runs);
  EXPECT_EQ(check.whole(), (std::vector<const PieceRecord*>{&gap, &unchained, &empty}));
  EXPECT_EQ(check.summed(), (std::vector<bool>{true, true, false, false, false, false, false, true, true, false}));

  std::vector<uint32_t> sums(runs.size(), 0);
  sums[0] = crc_of(data, 0, 50);
  sums[1] = crc_of(data, 50, 100);
  sums[7] = sums[8] = whole;
  EXPECT_NO_THROW(check.compare(group, sums, true));
  auto wrong = sums;
  wrong[1] ^= 1u;
  EXPECT_THROW(
      {
        try {
          check.compare(group, wrong, true);
        } catch (const acc::Error& e) {
          EXPECT_NE(std::string(e.what()).find("f: \"halves\" does not match its checksum"), std::string::npos)
              << e.what();
          throw;
        }
      },
      acc::Error);
  EXPECT_NO_THROW(check.compare(group, wrong, false));  // reading failed: that error is the one
  auto differ = sums;
  differ[8] ^= 1u;  // two reads of one range that read different bytes
  EXPECT_THROW(check.compare(group, differ, true), acc::Error);
}

}  // namespace
