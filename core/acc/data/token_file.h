#pragma once
// Token files in the llm.c format (also what nanoGPT-style data preparation writes):
//   header  256 little-endian int32: [0] magic 20240520, [1] version 1, [2] token count
//   tokens  `count` little-endian uint16 (GPT-2 ids < 65536)
// and TokenFile, the dataset of windows of seq_len+1 tokens from such a file: input_ids are
// the first seq_len, labels the same window shifted by one.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "acc/data/dataset.h"

namespace acc::io {
class MappedFile;
}

namespace acc::data {

inline constexpr int32_t kTokenFileMagic = 20240520;
inline constexpr int32_t kTokenFileVersion = 1;
inline constexpr int64_t kTokenFileHeaderBytes = 256 * 4;

// Writes through a temporary file renamed at the end; every token must be in [0, 65535].
void write_token_file(const std::filesystem::path& path, std::span<const int32_t> tokens);
std::vector<int32_t> read_token_file(const std::filesystem::path& path);

struct TokenFileOptions {
  // true: each sample is a window at a random start, drawn from (seed, epoch, index), so every
  // epoch sees different windows (training). false: sample i is the window at i*seq_len
  // (evaluation: the same, non-overlapping windows every time).
  bool random_windows = true;
};

// Batches hold "input_ids" and "labels", i32[B, seq_len]. size() = (tokens - 1) / seq_len, so
// an epoch reads about as many tokens as the file has.
class TokenFile : public Dataset {
 public:
  TokenFile(const std::filesystem::path& path, int64_t seq_len, TokenFileOptions options = {});

  int64_t num_tokens() const { return num_tokens_; }
  int64_t seq_len() const { return seq_len_; }
  int64_t size() const override { return (num_tokens_ - 1) / seq_len_; }
  Batch get_batch(std::span<const int64_t> indices, const EpochKey& key) const override;
  // First token of sample `index`'s window.
  int64_t window_start(int64_t index, const EpochKey& key) const;

 private:
  std::shared_ptr<const io::MappedFile> file_;  // shared: copies of the dataset share the map
  const uint16_t* tokens_ = nullptr;
  int64_t num_tokens_ = 0;
  int64_t seq_len_ = 0;
  TokenFileOptions options_;
};

}  // namespace acc::data
