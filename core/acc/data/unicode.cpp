#include "acc/data/unicode.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace acc::data::unicode {

namespace {

struct Range {
  char32_t first, last;
};

// \p{L} by block (see unicode.h for the scope). Sorted, non-overlapping.
constexpr Range kLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xAA, 0xAA},       {0xB5, 0xB5},
    {0xBA, 0xBA},       {0xC0, 0xD6},       {0xD8, 0xF6},       {0xF8, 0x2C1},
    {0x2C6, 0x2D1},     {0x2E0, 0x2E4},     {0x2EC, 0x2EC},     {0x2EE, 0x2EE},
    {0x370, 0x374},     {0x376, 0x377},     {0x37A, 0x37D},     {0x37F, 0x37F},
    {0x386, 0x386},     {0x388, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x561, 0x587},     {0x5D0, 0x5EA},     {0x620, 0x64A},
    {0x671, 0x6D3},     {0x904, 0x939},     {0xE01, 0xE30},     {0x10A0, 0x10FF},
    {0x1E00, 0x1FBC},   {0x1FC2, 0x1FCC},   {0x1FD0, 0x1FDB},   {0x1FE0, 0x1FEC},
    {0x1FF2, 0x1FFC},   {0x3041, 0x3096},   {0x309D, 0x309F},   {0x30A1, 0x30FA},
    {0x30FC, 0x30FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3},
    {0xF900, 0xFAFF},   {0xFB00, 0xFB06},   {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},
    {0xFF66, 0xFF9D},   {0x20000, 0x2FA1F},
};

// \p{N}: digits, Latin-1 superscripts and fractions, other scripts' digits, number forms.
constexpr Range kNumbers[] = {
    {0x30, 0x39},     {0xB2, 0xB3},     {0xB9, 0xB9},     {0xBC, 0xBE},
    {0x660, 0x669},   {0x6F0, 0x6F9},   {0x966, 0x96F},   {0xE50, 0xE59},
    {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2150, 0x2189},
    {0x2460, 0x249B}, {0x24EA, 0x24FF}, {0x2776, 0x2793}, {0x3007, 0x3007},
    {0x3021, 0x3029}, {0xFF10, 0xFF19},
};

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
