#pragma once
// Small text helpers shared by the config reader and the command line.
#include <optional>
#include <string>

namespace acc::util {

// Without leading and trailing spaces, tabs and line ends.
std::string trim(const std::string& s);
// The whole of `text` as an int ("12"), or nothing ("12x", "", out of range).
std::optional<int> parse_int(const std::string& text);

}  // namespace acc::util
