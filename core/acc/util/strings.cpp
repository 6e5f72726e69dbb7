#include "acc/util/strings.h"

#include <cctype>
#include <cmath>
#include <map>

namespace acc::util {

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  return begin == std::string::npos ? "" : s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::optional<int> parse_int(const std::string& text) {
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size()) return std::nullopt;
  return n;
}

std::optional<int64_t> parse_bytes(const std::string& text) {
  static const std::map<std::string, double> units = {
      {"", 1.0},       {"B", 1.0},       {"KB", 1e3},           {"MB", 1e6},
      {"GB", 1e9},     {"TB", 1e12},     {"KIB", 1024.0},       {"MIB", 1048576.0},
      {"GIB", 1073741824.0}, {"TIB", 1099511627776.0}};
  const std::string t = trim(text);
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(t, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string unit = upper(trim(t.substr(used)));
  const auto it = units.find(unit);
  if (it == units.end() || !(value > 0) || !std::isfinite(value)) return std::nullopt;
  return static_cast<int64_t>(std::llround(value * it->second));
}

}  // namespace acc::util
