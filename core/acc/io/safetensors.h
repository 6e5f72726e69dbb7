#pragma once
// safetensors files, the ecosystem's format for named tensors (Hugging Face, PyTorch, JAX):
//   8 bytes   little-endian uint64 N, the header length
//   N bytes   JSON {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, ...,
//             "__metadata__": {"key": "value"}}, padded with spaces to a multiple of 8
//   the data  raw little-endian elements; [b, e) are byte offsets from the data's start
// acc reads and writes F32, BF16, I32 and I64. Every check failure names the file and field.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "acc/tensor/tensor.h"

namespace acc::io {

using SafetensorsMetadata = std::map<std::string, std::string>;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0;  // byte offsets relative to the start of the data section
  uint64_t end = 0;
  int64_t numel() const { return shape_numel(shape); }
};

// Writes the tensors in the given order (names must be unique and not "__metadata__"), through a
// temporary file in the same directory that is renamed at the end.
void save_safetensors(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const SafetensorsMetadata& metadata = {});

// Writes a file whose tensors are declared up front (name, dtype, shape; the offsets are laid
// out here, in the given order) and whose data then arrives tensor by tensor, in any order:
// a model can be streamed to disk without ever being whole in memory. The file is written as
// a temporary next to `path` and appears under `path` only when finish() succeeds; a writer
// destroyed before that removes it. Each tensor's CRC-32 is kept for manifests.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::filesystem::path path, std::vector<SafetensorsEntry> entries,
                    const SafetensorsMetadata& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  // The whole of tensor `name`: entry(name).end - begin bytes at `data`.
  void write(const std::string& name, const void* data);
  // The next `bytes` bytes of tensor `name`, in order: a tensor too large to hold twice can be
  // written piece by piece. It counts as written once all its bytes have arrived.
  void append(const std::string& name, const void* data, uint64_t bytes);
  uint32_t crc32(const std::string& name) const;
  uint64_t file_bytes() const { return data_start_ + (entries_.empty() ? 0 : data_end_); }
  // Checks every tensor was written, flushes the file to disk (fsync) and renames it to `path`.
  void finish();

 private:
  size_t index_of(const std::string& name) const;

  std::filesystem::path path_, temp_;
  int fd_ = -1;
  uint64_t data_start_ = 0, data_end_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
  std::vector<uint32_t> crc_;
  std::vector<uint64_t> filled_;  // bytes of each tensor written so far
  std::vector<bool> written_;
};

// CRC-32 (the zlib / PNG polynomial) of `bytes` bytes, continuing from `crc`.
uint32_t crc32(const void* data, size_t bytes, uint32_t crc = 0);
// The CRC-32 of two runs of bytes end to end, from each one's CRC-32 and the second's length
// (zlib's crc32_combine, a macro there): ranks that read parts of a file check it whole
// without rereading it.
uint32_t combine_crc32(uint32_t first, uint32_t second, size_t second_bytes);

// Reads and validates every tensor of the file.
std::map<std::string, Tensor> load_safetensors(const std::filesystem::path& path);

// Reads the header once and then only what is asked for: whole tensors or element ranges of a
// tensor (what a rank needs of a sharded checkpoint). Reads use pread, so one reader can serve
// several threads at once.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::filesystem::path& path);
  ~SafetensorsReader();
  SafetensorsReader(SafetensorsReader&&) noexcept;
  SafetensorsReader& operator=(SafetensorsReader&&) noexcept;
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Entries in file order (ascending data offset).
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const SafetensorsMetadata& metadata() const { return metadata_; }
  bool contains(const std::string& name) const;
  const SafetensorsEntry& entry(const std::string& name) const;  // throws if absent

  Tensor read(const std::string& name) const;
  // Elements [begin, end) of the flattened tensor, as a 1-D tensor of its dtype.
  Tensor read_range(const std::string& name, int64_t begin, int64_t end) const;
  // The same elements written to dst, which must hold (end - begin) elements of the dtype.
  void read_range_into(const std::string& name, int64_t begin, int64_t end, void* dst) const;
  // Tells the kernel that this file will be read in long runs in order: its readahead for the
  // file doubles (posix_fadvise SEQUENTIAL), so more of the next run is in flight while the
  // current one is used.
  void expect_sequential_reads() const;

 private:
  void read_bytes(uint64_t file_offset, uint64_t count, void* dst) const;

  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;  // file offset of the data section
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
  SafetensorsMetadata metadata_;
};

}  // namespace acc::io
