#include "acc/memory/file_tier.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>
#include <string>

#include "acc/util/error.h"
#include "acc/util/log.h"

namespace acc::memory::file_tier {
namespace {

std::mutex g_mu;
std::filesystem::path g_dir;

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
  return page;
}

size_t round_to_pages(size_t n) {
  const size_t page = page_size();
  return n == 0 ? page : (n + page - 1) / page * page;
}

// The whole pages inside [ptr, ptr + nbytes): [begin, end), empty when there are none.
std::pair<uintptr_t, uintptr_t> whole_pages(const void* ptr, size_t nbytes) {
  const size_t page = page_size();
  const auto first = reinterpret_cast<uintptr_t>(ptr);
  return {(first + page - 1) / page * page, (first + nbytes) / page * page};
}

// A new file under `dir`, already unlinked: the open descriptor is all that names it.
int create_unlinked(const std::filesystem::path& dir) {
  std::string name = dir.string() + kFilePrefix + "XXXXXX";
  const int fd = mkstemp(name.data());
  ACC_CHECK(fd >= 0, "offload_dir '", dir.string(), "': cannot create a file there (",
            std::strerror(errno), ")");
  unlink(name.c_str());
  return fd;
}

}  // namespace

void set_dir(const std::filesystem::path& dir, int64_t reserve_bytes) {
  std::error_code ec;
  ACC_CHECK(std::filesystem::is_directory(dir, ec), "offload_dir '", dir.string(),
            "' is not a directory (create it first)");
  close(create_unlinked(dir));  // writable?
  struct statvfs fs {};
  ACC_CHECK(statvfs(dir.c_str(), &fs) == 0, "offload_dir '", dir.string(), "': statvfs failed (",
            std::strerror(errno), ")");
  const auto available = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  ACC_CHECK(available >= reserve_bytes, "offload_dir '", dir.string(), "' has ",
            available >> 20, " MiB free, but this rank's offloaded master parameters, "
            "gradients and optimizer state need about ", reserve_bytes >> 20, " MiB");
  struct statfs type {};
  if (statfs(dir.c_str(), &type) == 0 && type.f_type == TMPFS_MAGIC)
    log::warn("offload_dir '{}' is on tmpfs: its files are held in memory, so offloading there "
              "saves none; choose a directory on a disk", dir.string());
  std::lock_guard lock(g_mu);
  g_dir = dir;
}

void* map(size_t nbytes) {
  std::filesystem::path dir;
  {
    std::lock_guard lock(g_mu);
    dir = g_dir;
  }
  ACC_CHECK(!dir.empty(), "the file memory tier has no directory (offload_dir is not set)");
  const size_t size = round_to_pages(nbytes);
  const int fd = create_unlinked(dir);
  const int err = posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (err != 0) {
    close(fd);
    ACC_FAIL("offload_dir '", dir.string(), "': cannot reserve ", size, " bytes (",
             std::strerror(err), ")");
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  close(fd);  // the mapping keeps the file
  ACC_CHECK(p != MAP_FAILED, "offload_dir '", dir.string(), "': cannot map ", size, " bytes (",
            std::strerror(map_errno), ")");
  return p;
}

void unmap(void* ptr, size_t nbytes) noexcept {
  if (ptr) munmap(ptr, round_to_pages(nbytes));
}

void page_out(const void* ptr, size_t nbytes) noexcept {
  const auto [begin, end] = whole_pages(ptr, nbytes);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void zero(void* ptr, size_t nbytes) noexcept {
  const auto [begin, end] = whole_pages(ptr, nbytes);
  if (end <= begin || madvise(reinterpret_cast<void*>(begin), end - begin, MADV_REMOVE) != 0) {
    std::memset(ptr, 0, nbytes);
    return;
  }
  auto* first = static_cast<char*>(ptr);
  std::memset(first, 0, begin - reinterpret_cast<uintptr_t>(first));
  std::memset(reinterpret_cast<void*>(end), 0, reinterpret_cast<uintptr_t>(first) + nbytes - end);
}

}  // namespace acc::memory::file_tier
