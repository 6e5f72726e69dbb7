#pragma once
// Small text helpers shared by the config reader and the command line.
#include <cstdint>
#include <optional>
#include <string>

namespace acc::util {

// Without leading and trailing spaces, tabs and line ends.
std::string trim(const std::string& s);
// The whole of `text` as an int ("12"), or nothing ("12x", "", out of range).
std::optional<int> parse_int(const std::string& text);
// A size in bytes: "123", "8GiB", "1.5 GB", "512MiB", "64KB" (KB/MB/GB/TB are powers of 1000,
// KiB/MiB/GiB/TiB of 1024); nothing when it is not one or not positive.
std::optional<int64_t> parse_bytes(const std::string& text);

}  // namespace acc::util
