#include "acc/data/data_dir.h"

#include <cstdlib>

namespace acc::data {

std::optional<std::filesystem::path> find_data(const std::filesystem::path& relative) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (const char* data = std::getenv("ACC_DATA_DIR")) {
    const fs::path candidate = fs::path(data) / relative;
    if (fs::exists(candidate, ec)) return candidate;
    return std::nullopt;
  }
  for (fs::path dir = fs::current_path(ec); !ec && !dir.empty(); dir = dir.parent_path()) {
    const fs::path candidate = dir / "data" / relative;
    if (fs::exists(candidate, ec)) return candidate;
    if (dir == dir.parent_path()) break;
  }
  return std::nullopt;
}

}  // namespace acc::data
