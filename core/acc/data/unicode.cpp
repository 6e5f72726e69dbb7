#include "acc/data/unicode.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace acc::data::unicode {

namespace {

struct Range {
  char32_t first, last;
};

// \p{L} and \p{N}: kLetters and kNumbers, sorted, non-overlapping.
#include "unicode_ranges.inc"

// \s: Unicode White_Space, as Python's `regex` module (which GPT-2 used) matches it.
constexpr Range kSpaces[] = {
    {0x09, 0x0D},     {0x20, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},
    {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
    {0x205F, 0x205F}, {0x3000, 0x3000},
};

template <size_t N>
bool in(const Range (&ranges)[N], char32_t cp) {
  auto it = std::upper_bound(std::begin(ranges), std::end(ranges), cp,
                             [](char32_t c, const Range& r) { return c < r.first; });
  return it != std::begin(ranges) && cp <= std::prev(it)->last;
}

}  // namespace

CharClass classify(char32_t cp) {
  if (cp < 0x80) {  // most text: skip the table searches
    if ((cp | 0x20) >= U'a' && (cp | 0x20) <= U'z') return CharClass::letter;
    if (cp >= U'0' && cp <= U'9') return CharClass::number;
    if (cp == U' ' || (cp >= 0x09 && cp <= 0x0D)) return CharClass::space;
    return CharClass::other;
  }
  if (in(kLetters, cp)) return CharClass::letter;
  if (in(kNumbers, cp)) return CharClass::number;
  if (in(kSpaces, cp)) return CharClass::space;
  return CharClass::other;
}

Decoded decode_utf8(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = byte(pos);
  if (b0 < 0x80) return {b0, 1};
  size_t length;
  char32_t cp;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, cp = b0 & 0x07;
  } else {
    return {0xFFFD, 1};
  }
  if (pos + length > text.size()) return {0xFFFD, 1};
  for (size_t i = 1; i < length; ++i) {
    const unsigned char b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return {0xFFFD, 1};
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
  static constexpr std::array<char32_t, 5> kMin = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {0xFFFD, 1};
  return {cp, length};
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace acc::data::unicode
