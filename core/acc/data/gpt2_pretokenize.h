#pragma once
// GPT-2's pre-tokenisation: the split that the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// makes, written out by hand (std::regex has no \p{L}). BPE then runs inside each piece.
#include <string_view>
#include <vector>

namespace acc::data {

// The pieces, in order; they are views into `text` and concatenate back to it.
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

}  // namespace acc::data
