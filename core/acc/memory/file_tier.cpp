#include "acc/memory/file_tier.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <utility>
#include <string>

#include "acc/util/error.h"
#include "acc/util/log.h"

namespace acc::memory::file_tier {
namespace {

std::mutex g_mu;
std::filesystem::path g_dir;
// Each mapped block's file, by the block's address: read() and write() go through it.
struct Block {
  size_t size;
  int fd;
};
std::map<uintptr_t, Block> g_blocks;

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
  // Each block keeps its file open (read() and write() use it): allow as many as the system does.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
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
  if (p == MAP_FAILED) close(fd);
  ACC_CHECK(p != MAP_FAILED, "offload_dir '", dir.string(), "': cannot map ", size, " bytes (",
            std::strerror(map_errno), ")");
  std::lock_guard lock(g_mu);
  g_blocks[reinterpret_cast<uintptr_t>(p)] = {size, fd};
  return p;
}

void unmap(void* ptr, size_t nbytes) noexcept {
  if (!ptr) return;
  munmap(ptr, round_to_pages(nbytes));
  std::lock_guard lock(g_mu);
  const auto it = g_blocks.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_blocks.end()) return;
  close(it->second.fd);
  g_blocks.erase(it);
}

namespace {

// The file behind [at, at + nbytes) of a mapped block, and the offset of `at` in it.
std::pair<int, off_t> file_of(const void* at, size_t nbytes) {
  const auto a = reinterpret_cast<uintptr_t>(at);
  std::lock_guard lock(g_mu);
  auto it = g_blocks.upper_bound(a);
  ACC_CHECK(it != g_blocks.begin() && a < std::prev(it)->first + std::prev(it)->second.size, "file tier: ", at,
            " is in no block");
  --it;
  ACC_CHECK(a + nbytes <= it->first + it->second.size, "file tier: ", nbytes, " bytes at ", at,
            " run past their block");
  return {it->second.fd, static_cast<off_t>(a - it->first)};
}

}  // namespace

void read(const void* at, size_t nbytes, void* dst) {
  const auto [fd, offset] = file_of(at, nbytes);
  auto* out = static_cast<char*>(dst);
  for (size_t done = 0; done < nbytes;) {
    const ssize_t n = pread(fd, out + done, nbytes - done, offset + static_cast<off_t>(done));
    ACC_CHECK(n > 0 || (n < 0 && errno == EINTR), "file tier: reading ", nbytes, " bytes failed (",
              n == 0 ? "end of file" : std::strerror(errno), ")");
    if (n > 0) done += static_cast<size_t>(n);
  }
}

void write(void* at, size_t nbytes, const void* src) {
  const auto [fd, offset] = file_of(at, nbytes);
  const auto* in = static_cast<const char*>(src);
  for (size_t done = 0; done < nbytes;) {
    const ssize_t n = pwrite(fd, in + done, nbytes - done, offset + static_cast<off_t>(done));
    ACC_CHECK(n > 0 || (n < 0 && errno == EINTR), "file tier: writing ", nbytes, " bytes failed (",
              std::strerror(errno), ")");
    if (n > 0) done += static_cast<size_t>(n);
  }
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
