#pragma once
// Rank-prefixed output. mpirun --tag-output marks each line a rank prints as
// "[<job>,<rank>]<stdout>:text" (or <stderr>); accelerate shows it as "[rank <rank>] text".
#include <optional>
#include <string>
#include <string_view>

namespace acc::cli {

struct RankLine {
  int rank = 0;
  bool is_stderr = false;
  std::string text;
};

// The rank line a tagged line carries; nullopt for lines mpirun prints itself.
std::optional<RankLine> parse_tagged_line(std::string_view line);
std::string rank_prefixed(const RankLine& line);  // "[rank 3] text"

}  // namespace acc::cli
