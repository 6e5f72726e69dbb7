#include "acc/data/gpt2_pretokenize.h"

#include "acc/data/unicode.h"

namespace acc::data {

namespace {

using unicode::CharClass;

struct Char {
  char32_t cp;
  CharClass cls;
  size_t offset;  // byte offset in the text
};

// Length (in characters) of a contraction 's 't 're 've 'm 'll 'd starting at i, or 0.
size_t contraction_at(const std::vector<Char>& c, size_t i) {
  if (c[i].cp != U'\'' || i + 1 >= c.size()) return 0;
  const char32_t a = c[i + 1].cp;
  if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
  if (i + 2 >= c.size()) return 0;
  const char32_t b = c[i + 2].cp;
  if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
  return 0;
}

// Length of the next piece starting at character i, following the regex's alternatives in order.
size_t piece_at(const std::vector<Char>& c, size_t i) {
  if (size_t n = contraction_at(c, i)) return n;
  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional space, then a run of one class.
  size_t j = i;
  if (c[j].cp == U' ' && j + 1 < c.size() && c[j + 1].cls != CharClass::space) ++j;
  if (c[j].cls != CharClass::space) {
    const CharClass run = c[j].cls;
    size_t k = j;
    while (k < c.size() && c[k].cls == run) ++k;
    return k - i;
  }
  // "\s+(?!\S)" leaves the last space of a run to start the next word; "\s+" otherwise.
  size_t k = i;
  while (k < c.size() && c[k].cls == CharClass::space) ++k;
  if (k < c.size() && k - i >= 2) return k - i - 1;
  return k - i;
}

}  // namespace

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const auto d = unicode::decode_utf8(text, pos);
    chars.push_back({d.cp, unicode::classify(d.cp), pos});
    pos += d.length;
  }
  std::vector<std::string_view> pieces;
  for (size_t i = 0; i < chars.size();) {
    const size_t n = piece_at(chars, i);
    const size_t begin = chars[i].offset;
    const size_t end = i + n < chars.size() ? chars[i + n].offset : text.size();
    pieces.push_back(text.substr(begin, end - begin));
    i += n;
  }
  return pieces;
}

}  // namespace acc::data
