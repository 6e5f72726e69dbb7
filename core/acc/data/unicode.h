#pragma once
// The little Unicode the GPT-2 tokenizer needs: UTF-8 decoding that never fails (a byte that is
// not valid UTF-8 becomes its own "other" character, so any input round-trips) and the
// character classes of GPT-2's pre-tokenisation regex, \p{L}, \p{N} and \s.
//
// Letters and numbers are the Unicode general categories L and N over all code points (tables
// generated into unicode_ranges.inc); spaces are the White_Space property.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace acc::data::unicode {

enum class CharClass : uint8_t { letter, number, space, other };

CharClass classify(char32_t cp);

struct Decoded {
  char32_t cp;    // the code point; for an invalid byte, 0xFFFD
  size_t length;  // bytes consumed (1 for an invalid byte)
};
// Decodes the character starting at text[pos] (pos < text.size()).
Decoded decode_utf8(std::string_view text, size_t pos);
void append_utf8(std::string& out, char32_t cp);

}  // namespace acc::data::unicode
