#include "support/raw_disk.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <limits>
#include <vector>

#include "acc/io/safetensors.h"
#include "acc/memory/allocator.h"
#include "acc/util/error.h"
#include "support/measure.h"

namespace acc::bench {

namespace {

constexpr size_t kBlock = size_t{64} << 20;

// The file's descriptor, closed when it goes out of scope.
struct Fd {
  Fd(const std::filesystem::path& file, int flags) : fd(::open(file.c_str(), flags | O_CLOEXEC, 0644)) {
    ACC_CHECK(fd >= 0, "open ", file.string(), ": ", std::strerror(errno));
  }
  ~Fd() { ::close(fd); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int fd;
};

// Bytes a share's reader asks for in one pread(), into a buffer of that size.
constexpr int64_t kShareRead = int64_t{16} << 20;

// One block of `bytes` from acc's allocator per reader, returned when it goes out of scope. In
// huge pages, as acc's own buffers are: malloc's 4 KiB pages cost the AMD EPYC VM ~46 ms per
// 16 MiB to fault in (2.9 s per GiB), which the raw reads' times had included (a raw read of
// GPT-2 tiny's checkpoint 0.04 s with these blocks, 0.12-0.29 s without). Fresh blocks are
// faulted in by the readers' own reads; blocks the allocator kept from an earlier read come
// back already present.
struct ReaderBlocks {
  ReaderBlocks(int readers, size_t bytes) : bytes(bytes) {
    blocks.reserve(static_cast<size_t>(readers));
    try {
      for (int r = 0; r < readers; ++r)
        blocks.push_back(static_cast<char*>(memory::allocate(bytes, memory::Category::checkpoint)));
    } catch (...) {
      release();
      throw;
    }
  }
  ~ReaderBlocks() { release(); }
  ReaderBlocks(const ReaderBlocks&) = delete;
  ReaderBlocks& operator=(const ReaderBlocks&) = delete;
  void release() noexcept {
    for (char* b : blocks) memory::deallocate(b, bytes, memory::Category::checkpoint);
    blocks.clear();
  }
  size_t bytes;
  std::vector<char*> blocks;
};

}  // namespace

RawWriteTimes raw_write_file(const std::filesystem::path& file, int64_t bytes) {
  std::vector<char> block(kBlock);
  for (size_t i = 0; i < kBlock; ++i) block[i] = static_cast<char>(i * 131 + 7);
  Fd out(file, O_WRONLY | O_CREAT | O_TRUNC);
  RawWriteTimes times;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t left = bytes; left > 0;) {
    const ssize_t n = ::write(out.fd, block.data(), std::min<size_t>(kBlock, static_cast<size_t>(left)));
    if (n < 0 && errno == EINTR) continue;
    ACC_CHECK(n > 0, "write ", file.string(), ": ", n < 0 ? std::strerror(errno) : "nothing written");
    left -= n;
  }
  times.write_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  ACC_CHECK(::fsync(out.fd) == 0, "fsync ", file.string(), ": ", std::strerror(errno));
  times.fsync_seconds = seconds_since(t0);
  return times;
}

namespace {

// read()s the file to its end, at most kBlock bytes a call and `capacity` in all, each call's
// bytes going to next(got).
template <class Next>
int64_t read_to_end(const std::filesystem::path& file, int64_t capacity, Next next) {
  Fd in(file, O_RDONLY);
  int64_t got = 0;
  char probe = 0;
  for (;;) {
    const auto room = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(kBlock), capacity - got));
    // With no room left, one byte more is asked for into `probe`: the end, or a file too long.
    const ssize_t n = room > 0 ? ::read(in.fd, next(got), room) : ::read(in.fd, &probe, 1);
    if (n < 0 && errno == EINTR) continue;
    ACC_CHECK(n >= 0, "read ", file.string(), ": ", std::strerror(errno));
    if (n == 0) return got;
    ACC_CHECK(room > 0, "read ", file.string(), ": the file holds more than the ", capacity, " bytes expected");
    got += n;
  }
}

}  // namespace

int64_t raw_read_file(const std::filesystem::path& file) {
  const ReaderBlocks block(1, kBlock);
  return read_to_end(file, std::numeric_limits<int64_t>::max(), [&](int64_t) { return block.blocks[0]; });
}

int64_t raw_read_file_into(const std::filesystem::path& file, char* dst, int64_t capacity) {
  return read_to_end(file, capacity, [&](int64_t got) { return dst + got; });
}

namespace {

// Reads one share of `files` (see raw_read_share): each of `readers` threads its part, kShareRead
// bytes a pread() into a buffer of its own, each read then given to done(reader, bytes, count).
template <class Done>
int64_t read_share(const std::vector<std::filesystem::path>& files, int share, int shares, int readers, Done done) {
  ACC_CHECK(shares >= 1 && share >= 0 && share < shares && readers >= 1, "read of a share: share ", share, " of ",
            shares, " by ", readers, " readers");
  std::vector<int64_t> starts{0};  // each file's first byte in the run, and the end
  for (const auto& f : files) starts.push_back(starts.back() + static_cast<int64_t>(std::filesystem::file_size(f)));
  const int64_t total = starts.back();
  const int64_t lo = total * share / shares, hi = total * (share + 1) / shares;
  auto bound = [&](int r) { return lo + (hi - lo) * r / readers; };  // reader r's part: [bound(r), bound(r + 1))
  const ReaderBlocks buffers(readers, static_cast<size_t>(kShareRead));
  auto read_part = [&](int reader) {
    char* const buffer = buffers.blocks[static_cast<size_t>(reader)];
    const int64_t begin = bound(reader), end = bound(reader + 1);
    for (size_t i = 0; i < files.size(); ++i) {
      const int64_t from = std::max(begin, starts[i]), to = std::min(end, starts[i + 1]);
      if (from >= to) continue;
      Fd in(files[i], O_RDONLY);
      for (int64_t at = from; at < to;) {
        const ssize_t n = ::pread(in.fd, buffer, static_cast<size_t>(std::min(kShareRead, to - at)),
                                  static_cast<off_t>(at - starts[i]));
        if (n < 0 && errno == EINTR) continue;
        ACC_CHECK(n > 0, "read ", files[i].string(), ": ", n < 0 ? std::strerror(errno) : "unexpected end of file");
        done(reader, buffer, n);
        at += n;
      }
    }
  };
  std::vector<std::future<void>> others;  // get() rethrows a reader's failure
  for (int r = 1; r < readers; ++r) others.push_back(std::async(std::launch::async, read_part, r));
  read_part(0);
  for (auto& f : others) f.get();
  return hi - lo;
}

}  // namespace

int64_t raw_read_share(const std::vector<std::filesystem::path>& files, int share, int shares, int readers) {
  return read_share(files, share, shares, readers, [](int, const char*, ssize_t) {});
}

int64_t checked_read_share(const std::vector<std::filesystem::path>& files, int share, int shares, int readers) {
  std::vector<uint32_t> sums(static_cast<size_t>(readers), 0);
  const int64_t bytes = read_share(files, share, shares, readers, [&](int reader, const char* data, ssize_t n) {
    uint32_t& sum = sums[static_cast<size_t>(reader)];
    sum = io::crc32(data, static_cast<size_t>(n), sum);
  });
  uint32_t all = 0;
  for (const uint32_t sum : sums) all ^= sum;
  volatile uint32_t kept = all;  // the sums are used, so the work stays
  (void)kept;
  return bytes;
}

void drop_file_from_page_cache(const std::filesystem::path& file) {
  Fd f(file, O_RDONLY);
  ::fdatasync(f.fd);  // dirty pages cannot be dropped
  ::posix_fadvise(f.fd, 0, 0, POSIX_FADV_DONTNEED);
}

}  // namespace acc::bench
