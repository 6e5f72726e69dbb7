#pragma once
// A read-only memory map of a whole file, so large token files are paged in on demand instead
// of being read up front.
#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace acc::io {

class MappedFile {
 public:
  // Throws acc::Error naming the file if it cannot be opened or mapped. `what` names the
  // caller in the message ("token file").
  MappedFile(const std::filesystem::path& path, const char* what);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace acc::io
