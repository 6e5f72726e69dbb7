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

// A mapped block's size and open file: read() and write() go through it.
struct Block {
  size_t size;
  int fd;
};
// The tier's directory and its blocks by address. Never destroyed: tensors may be freed after
// main returns.
struct Registry {
  std::mutex mu;
  std::filesystem::path dir;
  std::map<uintptr_t, Block> blocks;
};
Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

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
  const int fd = mkostemp(name.data(), O_CLOEXEC);
  ACC_CHECK(fd >= 0, "offload_dir '", dir.string(), "': cannot create a file there (",
            std::strerror(errno), errno == EMFILE ? "; each offloaded block keeps its file open: raise ulimit -n" : "",
            ")");
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
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.dir = dir;
}

void* map(size_t nbytes) {
  Registry& r = registry();
  std::filesystem::path dir;
  {
    std::lock_guard lock(r.mu);
    dir = r.dir;
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
  std::lock_guard lock(r.mu);
  r.blocks[reinterpret_cast<uintptr_t>(p)] = {size, fd};
  return p;
}

void unmap(void* ptr, size_t nbytes) noexcept {
  if (!ptr) return;
  Registry& r = registry();
  std::lock_guard lock(r.mu);  // held through munmap: no map() gets this address back before its entry goes
  const auto it = r.blocks.find(reinterpret_cast<uintptr_t>(ptr));
  if (it != r.blocks.end()) {
    close(it->second.fd);
    r.blocks.erase(it);
  }
  munmap(ptr, round_to_pages(nbytes));
}

namespace {

// The file of the block holding [at, at + nbytes), and where `at` is in it.
struct Place {
  int fd;
  off_t offset;
};
Place place_of(Registry& r, const void* at, size_t nbytes) {
  const auto a = reinterpret_cast<uintptr_t>(at);
  auto it = r.blocks.upper_bound(a);
  ACC_CHECK(it != r.blocks.begin() && a < std::prev(it)->first + std::prev(it)->second.size, "file tier: ", at,
            " is in no block");
  --it;
  ACC_CHECK(a + nbytes <= it->first + it->second.size, "file tier: ", nbytes, " bytes at ", at,
            " run past their block");
  return {it->second.fd, static_cast<off_t>(a - it->first)};
}

// Copies between [at, at + nbytes) of a mapped block and `buffer`, through the block's file:
// into the file when `to_file`, out of it otherwise.
void through_file(const void* at, size_t nbytes, void* buffer, bool to_file) {
  Registry& r = registry();
  Place place{};
  std::filesystem::path dir;
  {
    std::lock_guard lock(r.mu);
    place = place_of(r, at, nbytes);
    dir = r.dir;
  }
  auto* bytes = static_cast<char*>(buffer);
  for (size_t done = 0; done < nbytes;) {
    const off_t where = place.offset + static_cast<off_t>(done);
    const ssize_t n = to_file ? pwrite(place.fd, bytes + done, nbytes - done, where)
                              : pread(place.fd, bytes + done, nbytes - done, where);
    if (n < 0 && errno == EINTR) continue;
    ACC_CHECK(n > 0, "offload_dir '", dir.string(), "': ", to_file ? "writing " : "reading ", nbytes,
              " bytes at offset ", where, " of a block's file failed (",
              n == 0 ? "it ends there" : std::strerror(errno), ")");
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void read(const void* at, size_t nbytes, void* dst) { through_file(at, nbytes, dst, false); }

void write(void* at, size_t nbytes, const void* src) {
  through_file(at, nbytes, const_cast<void*>(src), true);  // only read from when writing the file
}

void copy(void* to, const void* from, size_t nbytes) {
  Registry& r = registry();
  Place in{}, out{};
  std::filesystem::path dir;
  {
    std::lock_guard lock(r.mu);
    in = place_of(r, from, nbytes);
    out = place_of(r, to, nbytes);
    dir = r.dir;
  }
  for (size_t done = 0; done < nbytes;) {
    loff_t in_at = in.offset + static_cast<off_t>(done), out_at = out.offset + static_cast<off_t>(done);
    const ssize_t n = copy_file_range(in.fd, &in_at, out.fd, &out_at, nbytes - done, 0);
    if (n < 0 && errno == EINTR) continue;
    ACC_CHECK(n > 0, "offload_dir '", dir.string(), "': copying ", nbytes, " bytes between block files failed (",
              n == 0 ? "the source ends there" : std::strerror(errno), ")");
    done += static_cast<size_t>(n);
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
