// llm.c token files: writer/reader round trip, the exact on-disk layout, TokenFile windows
// (shapes, shift, determinism per (seed, epoch, index)) and the errors for bad files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "acc/data/dataloader.h"
#include "acc/data/token_file.h"
#include "support/test_support.h"

namespace fs = std::filesystem;
using acc::data::EpochKey;
using acc::data::TokenFile;

using acc::test::error_of;
using acc::test::fresh_dir;

namespace {

}  // namespace

TEST(TokenFileFormat, RoundTripAndLayout) {
  const auto dir = fresh_dir("tokens_roundtrip");
  const auto tokens = acc::test::random_ints(1001, 4, 0, 65536);
  acc::data::write_token_file(dir / "t.bin", tokens);
  EXPECT_EQ(acc::data::read_token_file(dir / "t.bin"), tokens);

  // The bytes themselves: 256 int32 header then uint16 tokens.
  std::ifstream in(dir / "t.bin", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), 1024u + 2 * 1001);
  int32_t header[256];
  std::memcpy(header, bytes.data(), sizeof header);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 1001);
  for (int i = 3; i < 256; ++i) EXPECT_EQ(header[i], 0);
  uint16_t last;
  std::memcpy(&last, bytes.data() + 1024 + 2 * 1000, 2);
  EXPECT_EQ(last, tokens.back());
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST(TokenFileFormat, RejectsTokensOutsideUint16) {
  const auto dir = fresh_dir("tokens_range");
  const std::vector<int32_t> bad = {1, 70000};
  EXPECT_NE(error_of([&] { acc::data::write_token_file(dir / "t.bin", bad); }).find("token 1 is 70000"),
            std::string::npos);
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(TokenFileFormat, BadFilesNameTheFileAndTheProblem) {
  const auto dir = fresh_dir("tokens_bad");
  const std::vector<int32_t> tokens(50, 7);
  acc::data::write_token_file(dir / "good.bin", tokens);
  std::ifstream in(dir / "good.bin", std::ios::binary);
  std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  auto write = [&](const std::string& name, std::string bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return dir / name;
  };
  std::string magic = good;
  magic[0] = 'X';
  std::string version = good;
  version[4] = 2;
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {write("short.bin", good.substr(0, 100)), "shorter than the 1024-byte header"},
      {write("magic.bin", magic), "expected 20240520"},
      {write("version.bin", version), "version 2, expected 1"},
      {write("truncated.bin", good.substr(0, good.size() - 3)), "truncated?"},
      {dir / "missing.bin", "cannot open"},
  };
  for (const auto& [path, expect] : cases) {
    const std::string err = error_of([&] { TokenFile(path, 4); });
    EXPECT_NE(err.find(expect), std::string::npos) << err;
    EXPECT_NE(err.find(path.string()), std::string::npos) << err;
  }
  EXPECT_NE(error_of([&] { TokenFile(dir / "good.bin", 50); }).find("too few for one window"),
            std::string::npos);
}

TEST(TokenFileDataset, WindowsAreShiftedPairsFromTheFile) {
  const auto dir = fresh_dir("tokens_windows");
  std::vector<int32_t> tokens(1237);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7919) % 50257);
  acc::data::write_token_file(dir / "t.bin", tokens);

  const int64_t T = 13;  // odd on purpose
  TokenFile data(dir / "t.bin", T);
  EXPECT_EQ(data.num_tokens(), 1237);
  EXPECT_EQ(data.size(), (1237 - 1) / T);
  const EpochKey key{5, 2};
  const std::vector<int64_t> idx = {0, 94, 17};
  const auto batch = data.get_batch(idx, key);
  EXPECT_EQ(batch["input_ids"].shape(), (acc::Shape{3, T}));
  EXPECT_EQ(batch["labels"].shape(), (acc::Shape{3, T}));
  const auto x = batch["input_ids"].to_vector_i64();
  const auto y = batch["labels"].to_vector_i64();
  std::set<int64_t> starts;
  for (size_t r = 0; r < idx.size(); ++r) {
    const int64_t s = data.window_start(idx[r], key);
    starts.insert(s);
    ASSERT_GE(s, 0);
    ASSERT_LE(s + T + 1, 1237);
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(x[r * T + t], tokens[s + t]);
      EXPECT_EQ(y[r * T + t], tokens[s + t + 1]);
    }
  }
  EXPECT_EQ(starts.size(), 3u);

  // Starts depend on (seed, epoch, index) only: a copy of the dataset agrees, another epoch not.
  TokenFile again(dir / "t.bin", T);
  int differ = 0;
  for (int64_t i = 0; i < data.size(); ++i) {
    EXPECT_EQ(again.window_start(i, key), data.window_start(i, key));
    differ += data.window_start(i, key) != data.window_start(i, EpochKey{5, 3});
  }
  EXPECT_GT(differ, data.size() / 2);

  TokenFile sequential(dir / "t.bin", T, {.random_windows = false});
  EXPECT_EQ(sequential.window_start(94, key), 94 * T);
  EXPECT_THROW(data.get_batch(std::vector<int64_t>{data.size()}, key), acc::Error);
}

TEST(TokenFileDataset, WorksInADataLoader) {
  const auto dir = fresh_dir("tokens_loader");
  acc::data::write_token_file(dir / "t.bin", acc::test::random_ints(500, 8, 0, 50257));
  acc::data::DataLoader loader(TokenFile(dir / "t.bin", 16),
                               {.batch_size = 8, .shuffle = true, .drop_last = true});
  int64_t steps = 0;
  for (auto& batch : loader) {
    EXPECT_EQ(batch["input_ids"].shape(), (acc::Shape{8, 16}));
    EXPECT_EQ(batch["input_ids"].dtype(), acc::DType::i32);
    ++steps;
  }
  EXPECT_EQ(steps, (499 / 16) / 8);
}
