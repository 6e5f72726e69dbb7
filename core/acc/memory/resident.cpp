#include "acc/memory/resident.h"

#include <malloc.h>

#include <fstream>
#include <string>

#include "acc/memory/allocator.h"

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

}  // namespace

int64_t resident_bytes() { return status_kb_line("VmRSS"); }

int64_t peak_resident_bytes() { return status_kb_line("VmHWM"); }

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
