#pragma once
// The disk's raw sequential speed, the ceiling of the benchmarks of acc's file I/O
// (bench_checkpoint, bench_offload): plain write() and read() through a 64 MiB buffer, and
// pread() of a share of files by several threads. Reads go into buffers from acc's allocator,
// in huge pages as acc's own are. Each call runs on the calling process alone; a collective
// benchmark times them on every rank at once. Failures throw acc::Error naming the file and
// the call.
#include <cstdint>
#include <filesystem>
#include <vector>

namespace acc::bench {

struct RawWriteTimes {
  double write_seconds = 0, fsync_seconds = 0;
};
// Writes exactly `bytes` to `file` (created or truncated), then fsync()s and closes it.
RawWriteTimes raw_write_file(const std::filesystem::path& file, int64_t bytes);
// read()s `file` to its end, 64 MiB at a time into one buffer; the bytes read.
int64_t raw_read_file(const std::filesystem::path& file);
// read()s `file` into `dst`, 64 MiB a call, as a loader fills new tensors, up to `capacity`
// bytes (an error if the file holds more); the bytes read.
int64_t raw_read_file_into(const std::filesystem::path& file, char* dst, int64_t capacity);
// Reads one share of `files` taken as one run of bytes in their order: bytes
// [share * T / shares, (share + 1) * T / shares) of the T in all, cut into `readers` contiguous
// parts read at once by as many threads, each pread()ing 16 MiB at a time into a buffer of its
// own, as a loader's threads read (one stream of read() calls is the slower on some virtual
// disks); the bytes read. Every rank reading its share at once reads the files once.
int64_t raw_read_share(const std::vector<std::filesystem::path>& files, int share, int shares, int readers);
// raw_read_share with every read summed by acc's CRC-32 (io::crc32) as it lands: the reading
// and checking that a load cannot skip, without the rest of its work (new memory for the
// state, placing the parameters, planning); the bytes read.
int64_t checked_read_share(const std::vector<std::filesystem::path>& files, int share, int shares, int readers);
// Drops the file's clean (written back) pages from the page cache, so that the next read comes
// from the disk. Needs no privileges.
void drop_file_from_page_cache(const std::filesystem::path& file);

}  // namespace acc::bench
