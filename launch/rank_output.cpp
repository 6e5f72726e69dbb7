#include "rank_output.h"

#include <algorithm>
#include <charconv>

namespace acc::cli {

std::optional<RankLine> parse_tagged_line(std::string_view line) {
  // [job,rank]<stream>:text
  if (line.empty() || line[0] != '[') return std::nullopt;
  const size_t comma = line.find(','), close = line.find(']');
  if (comma == std::string_view::npos || close == std::string_view::npos || comma > close)
    return std::nullopt;
  RankLine out;
  const auto [end, ec] = std::from_chars(line.data() + comma + 1, line.data() + close, out.rank);
  if (ec != std::errc() || end != line.data() + close) return std::nullopt;
  const std::string_view rest = line.substr(close + 1);
  for (const auto& [tag, is_err] : {std::pair{"<stdout>:", false}, std::pair{"<stderr>:", true}}) {
    if (rest.rfind(tag, 0) == 0) {
      out.is_stderr = is_err;
      out.text = std::string(rest.substr(std::string_view(tag).size()));
      return out;
    }
  }
  return std::nullopt;
}

std::string rank_prefixed(const RankLine& line) {
  return "[rank " + std::to_string(line.rank) + "] " + line.text;
}

bool RepeatedErrors::held_back(const RankLine& line) {
  if (!line.is_stderr || line.text.find(": error: ") == std::string::npos) return false;
  const auto [it, first] = seen_.try_emplace(line.text, line.rank, std::vector<int>{});
  if (first) return false;
  it->second.second.push_back(line.rank);
  return true;
}

std::vector<std::string> RepeatedErrors::finish() const {
  std::vector<std::string> out;
  for (const auto& [text, ranks] : seen_) {
    const int first = ranks.first;
    std::vector<int> later = ranks.second;
    if (later.empty()) continue;
    std::ranges::sort(later);
    std::string line = later.size() == 1 ? "[rank " : "[ranks ";
    for (size_t i = 0; i < later.size(); ++i) line += (i ? ", " : "") + std::to_string(later[i]);
    out.push_back(line + "] the same error as rank " + std::to_string(first));
  }
  return out;
}

}  // namespace acc::cli
