#pragma once
// Where scripts/fetch-data puts downloaded data: $ACC_DATA_DIR if set, else the first folder
// named data/ holding `relative`, looking in the current folder and then its parents (so tests
// run from build/tests/ find the repository's data/).
#include <filesystem>
#include <optional>

namespace acc::data {

// The path data/<relative> (or $ACC_DATA_DIR/<relative>) if it exists.
std::optional<std::filesystem::path> find_data(const std::filesystem::path& relative);

}  // namespace acc::data
