#include "acc/data/token_file.h"

#include <bit>
#include <cstring>
#include <string>

#include "acc/io/atomic_file.h"
#include "acc/io/mapped_file.h"
#include "acc/tensor/random.h"
#include "acc/util/error.h"

namespace acc::data {

static_assert(std::endian::native == std::endian::little, "token files are little-endian");

namespace {

// Checks the header against the file size and returns the token count.
int64_t checked_token_count(const io::MappedFile& file) {
  const std::string name = file.path().string();
  ACC_CHECK(static_cast<int64_t>(file.size()) >= kTokenFileHeaderBytes, "token file '", name,
            "': ", file.size(), " bytes is shorter than the ", kTokenFileHeaderBytes,
            "-byte header (truncated or not a token file)");
  int32_t header[3];
  std::memcpy(header, file.data(), sizeof header);
  ACC_CHECK(header[0] == kTokenFileMagic, "token file '", name, "': magic number ", header[0],
            ", expected ", kTokenFileMagic, " (not an llm.c token file)");
  ACC_CHECK(header[1] == kTokenFileVersion, "token file '", name, "': version ", header[1],
            ", expected ", kTokenFileVersion, " (uint16 tokens)");
  const int64_t count = header[2];
  const int64_t expected = kTokenFileHeaderBytes + 2 * count;
  ACC_CHECK(count >= 0 && static_cast<int64_t>(file.size()) == expected, "token file '", name,
            "': header says ", count, " tokens (", expected, " bytes) but the file has ",
            file.size(), " bytes (truncated?)");
  return count;
}

}  // namespace

void write_token_file(const std::filesystem::path& path, std::span<const int32_t> tokens) {
  ACC_CHECK(tokens.size() <= 0x7fffffffu, "write_token_file '", path.string(), "': ",
            tokens.size(), " tokens exceed the format's int32 count");
  std::vector<uint16_t> packed(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    ACC_CHECK(tokens[i] >= 0 && tokens[i] <= 0xffff, "write_token_file '", path.string(),
              "': token ", i, " is ", tokens[i], ", expected [0, 65535] (uint16 format)");
    packed[i] = static_cast<uint16_t>(tokens[i]);
  }
  int32_t header[256] = {kTokenFileMagic, kTokenFileVersion, static_cast<int32_t>(tokens.size())};
  io::write_file_atomically(path, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    out.write(reinterpret_cast<const char*>(packed.data()),
              static_cast<std::streamsize>(packed.size() * sizeof(uint16_t)));
  });
}

std::vector<int32_t> read_token_file(const std::filesystem::path& path) {
  io::MappedFile file(path, "token file");
  const int64_t count = checked_token_count(file);
  const auto* tokens = reinterpret_cast<const uint16_t*>(file.data() + kTokenFileHeaderBytes);
  return {tokens, tokens + count};
}

TokenFile::TokenFile(const std::filesystem::path& path, int64_t seq_len, TokenFileOptions options)
    : file_(std::make_shared<const io::MappedFile>(path, "token file")),
      seq_len_(seq_len),
      options_(options) {
  num_tokens_ = checked_token_count(*file_);
  tokens_ = reinterpret_cast<const uint16_t*>(file_->data() + kTokenFileHeaderBytes);
  ACC_CHECK(seq_len >= 1, "TokenFile '", path.string(), "': seq_len must be >= 1, got ", seq_len);
  ACC_CHECK(num_tokens_ >= seq_len + 1, "TokenFile '", path.string(), "': ", num_tokens_,
            " tokens are too few for one window of seq_len+1 = ", seq_len + 1);
}

int64_t TokenFile::window_start(int64_t index, const EpochKey& key) const {
  if (!options_.random_windows) return index * seq_len_;
  const uint64_t stream =
      random::stream_key(key.seed, "acc.data.TokenFile/" + std::to_string(key.epoch));
  const auto starts = static_cast<uint64_t>(num_tokens_ - seq_len_);  // valid starts
  return static_cast<int64_t>(random::bits(stream, static_cast<uint64_t>(index)) % starts);
}

Batch TokenFile::get_batch(std::span<const int64_t> indices, const EpochKey& key) const {
  check_indices(indices, size(), "TokenFile");
  const auto rows = static_cast<int64_t>(indices.size());
  Tensor inputs = Tensor::empty({rows, seq_len_}, DType::i32);
  Tensor labels = Tensor::empty({rows, seq_len_}, DType::i32);
  int32_t* x = inputs.data<int32_t>();
  int32_t* y = labels.data<int32_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* window = tokens_ + window_start(indices[static_cast<size_t>(r)], key);
    for (int64_t t = 0; t < seq_len_; ++t) {
      x[r * seq_len_ + t] = window[t];
      y[r * seq_len_ + t] = window[t + 1];
    }
  }
  Batch batch;
  batch.set("input_ids", std::move(inputs));
  batch.set("labels", std::move(labels));
  return batch;
}

}  // namespace acc::data
