#include "acc/memory/resident.h"

#include <malloc.h>

#include <cctype>
#include <fstream>
#include <string>

#include "acc/memory/allocator.h"
#include "acc/memory/file_tier.h"

namespace acc::memory {
namespace {

// A "Key:   1234 kB" line of /proc/self/status, in bytes (0 when absent).
int64_t status_kb_line(const char* key) {
  std::ifstream status("/proc/self/status");
  const std::string prefix = std::string(key) + ":";
  for (std::string line; std::getline(status, line);)
    if (line.rfind(prefix, 0) == 0) return std::stoll(line.substr(prefix.size())) * 1024;
  return 0;
}

// "Key: 1234" of /proc/self/io, in bytes (0 when absent).
int64_t io_line(const char* key) {
  std::ifstream io("/proc/self/io");
  const std::string prefix = std::string(key) + ":";
  for (std::string line; std::getline(io, line);)
    if (line.rfind(prefix, 0) == 0) return std::stoll(line.substr(prefix.size()));
  return 0;
}

}  // namespace

ResidentKinds resident_kinds() {
  ResidentKinds kinds{.anonymous = status_kb_line("RssAnon")};
  // smaps: a mapping's header line ("start-end perms offset dev inode path"), then its fields.
  std::ifstream smaps("/proc/self/smaps");
  bool tier = false;
  for (std::string line; std::getline(smaps, line);) {
    if (line.rfind("Rss:", 0) == 0) {
      if (tier) kinds.file_tier += std::stoll(line.substr(4)) * 1024;
    } else if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < line.find(' ')) {
      tier = line.find(file_tier::kFilePrefix) != std::string::npos;
    }
  }
  return kinds;
}

StorageIo storage_io() { return {.read = io_line("read_bytes"), .written = io_line("write_bytes")}; }

int64_t resident_bytes() { return status_kb_line("VmRSS"); }

int64_t peak_resident_bytes() { return status_kb_line("VmHWM"); }

int64_t data_bytes() { return status_kb_line("VmData"); }

bool reset_peak_resident() {
  std::ofstream refs("/proc/self/clear_refs");
  refs << "5";
  refs.flush();
  return static_cast<bool>(refs);
}

int64_t begin_resident_phase() {
  release_cached();
  malloc_trim(0);
  const int64_t now = resident_bytes();
  return reset_peak_resident() ? now : -1;
}

}  // namespace acc::memory
