#include "acc/io/atomic_file.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>

#include "acc/util/error.h"

namespace acc::io {

namespace {

// Unique per process and call, so concurrent writers of the same target never share a temp.
std::filesystem::path temp_path_for(const std::filesystem::path& path) {
  static std::atomic<uint64_t> counter{0};
  std::string name = ".";
  name += path.filename().string();
  name += ".tmp.";
  name += std::to_string(::getpid());
  name += '.';
  name += std::to_string(counter.fetch_add(1));
  return path.parent_path() / name;
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(std::ostream&)>& write) {
  const std::filesystem::path temp = temp_path_for(path);
  try {
    {
      std::ofstream out(temp, std::ios::binary | std::ios::trunc);
      ACC_CHECK(out.is_open(), "write_file_atomically: cannot create '", temp.string(),
                "' (does the directory exist and is it writable?)");
      write(out);
      out.flush();
      ACC_CHECK(out.good(), "write_file_atomically: writing '", temp.string(),
                "' failed (disk full?)");
    }
    std::error_code ec;
    std::filesystem::rename(temp, path, ec);
    ACC_CHECK(!ec, "write_file_atomically: cannot rename '", temp.string(), "' to '",
              path.string(), "': ", ec.message());
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw;
  }
}

}  // namespace acc::io
