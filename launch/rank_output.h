#pragma once
// Rank-prefixed output. mpirun --tag-output marks each line a rank prints as
// "[<job>,<rank>]<stdout>:text" (or <stderr>); accelerate shows it as "[rank <rank>] text".
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace acc::cli {

struct RankLine {
  int rank = 0;
  bool is_stderr = false;
  std::string text;
};

// The rank line a tagged line carries; nullopt for lines mpirun prints itself.
std::optional<RankLine> parse_tagged_line(std::string_view line);
std::string rank_prefixed(const RankLine& line);  // "[rank 3] text"

// Ranks that stop on the same error (a config or model every rank checks) each print it: the
// first rank's line is shown, the others' held back and named once at the end.
class RepeatedErrors {
 public:
  // True when `line` is an error line ("<program>: error: ...") another rank already printed.
  bool held_back(const RankLine& line);
  // "[ranks 1, 2, 3] the same error as rank 0", one per error held back.
  std::vector<std::string> finish() const;

 private:
  std::map<std::string, std::pair<int, std::vector<int>>> seen_;  // text: first rank, later ones
};

}  // namespace acc::cli
