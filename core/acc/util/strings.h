#pragma once
// Small text helpers shared by the config reader and the command line.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace acc::util {

// Without leading and trailing spaces, tabs and line ends.
std::string trim(const std::string& s);
// `text` in upper case (ASCII letters), for names matched without case.
std::string upper(std::string_view text);
// The whole of `text` as an int ("12"), or nothing ("12x", "", out of range).
std::optional<int> parse_int(const std::string& text);
// A size in bytes: "123", "8GiB", "1.5 GB", "512MiB", "64KB" (KB/MB/GB/TB are powers of 1000,
// KiB/MiB/GiB/TiB of 1024); nothing when it is not one or not positive.
std::optional<int64_t> parse_bytes(const std::string& text);

// The items (strings, or numbers written in decimal) with `separator` between them, for
// messages: join({"fsdp", "model"}) is "fsdp, model".
template <class Items>
std::string join(const Items& items, std::string_view separator = ", ") {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += separator;
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(item)>>)
      out += std::to_string(item);
    else
      out += item;
    first = false;
  }
  return out;
}

}  // namespace acc::util
