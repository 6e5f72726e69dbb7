#include <fcntl.h>
#include <isa-l/crc.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "acc/io/safetensors.h"
#include "acc/io/safetensors_header.h"
#include "acc/util/error.h"

namespace acc::io {

// ISA-L's folding CRC (PCLMULQDQ, VPCLMULQDQ on AVX-512) computes zlib's CRC-32 several times
// faster than zlib; tests/io/crc32_test.cpp checks it against zlib.
uint32_t crc32(const void* data, size_t bytes, uint32_t crc) {
  return crc32_gzip_refl(crc, static_cast<const unsigned char*>(data), bytes);
}

uint32_t combine_crc32(uint32_t first, uint32_t second, size_t second_bytes) {
  return static_cast<uint32_t>(crc32_combine(first, second, static_cast<z_off_t>(second_bytes)));
}

namespace {

void write_all(int fd, const void* data, uint64_t bytes, uint64_t offset, const std::string& file) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    ACC_CHECK(n > 0, "safetensors '", file, "': writing ", bytes, " bytes at offset ", offset,
              " failed (", n < 0 ? std::strerror(errno) : "no progress", ")");
    p += n;
    bytes -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

}  // namespace

SafetensorsWriter::SafetensorsWriter(std::filesystem::path path,
                                     std::vector<SafetensorsEntry> entries,
                                     const SafetensorsMetadata& metadata)
    : path_(std::move(path)), entries_(std::move(entries)) {
  const std::string file = path_.string();
  uint64_t offset = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    SafetensorsEntry& e = entries_[i];
    ACC_CHECK(e.name != "__metadata__", "safetensors '", file,
              "': \"__metadata__\" is reserved and cannot name a tensor");
    ACC_CHECK(index_.emplace(e.name, i).second, "safetensors '", file, "': the name \"", e.name,
              "\" appears twice");
    e.begin = offset;
    e.end = offset + static_cast<uint64_t>(e.numel()) * dtype_size(e.dtype);
    offset = e.end;
  }
  data_end_ = offset;
  crc_.assign(entries_.size(), 0);
  filled_.assign(entries_.size(), 0);
  written_.assign(entries_.size(), false);
  const std::string header = safetensors_detail::build_header(entries_, metadata);
  data_start_ = 8 + header.size();

  std::string temp_name = ".";
  temp_name += path_.filename().string();
  temp_name += ".tmp.";
  temp_name += std::to_string(::getpid());
  temp_ = path_.parent_path() / temp_name;
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ACC_CHECK(fd_ >= 0, "safetensors '", file, "': cannot create '", temp_.string(), "' (",
            std::strerror(errno), ")");
  try {
    const uint64_t n = header.size();
    write_all(fd_, &n, sizeof n, 0, file);
    write_all(fd_, header.data(), header.size(), 8, file);
  } catch (...) {
    ::close(fd_);
    ::unlink(temp_.c_str());
    throw;
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(temp_.c_str());  // not finished: leave nothing half-written behind
}

size_t SafetensorsWriter::index_of(const std::string& name) const {
  const auto it = index_.find(name);
  ACC_CHECK(it != index_.end(), "safetensors '", path_.string(), "': no tensor \"", name,
            "\" was declared");
  return it->second;
}

void SafetensorsWriter::write(const std::string& name, const void* data) {
  const size_t i = index_of(name);
  ACC_CHECK(filled_[i] == 0, "safetensors '", path_.string(), "': \"", name, "\" is written twice");
  append(name, data, entries_[i].end - entries_[i].begin);
}

void SafetensorsWriter::append(const std::string& name, const void* data, uint64_t bytes) {
  ACC_CHECK(fd_ >= 0, "safetensors '", path_.string(), "': write after finish()");
  const size_t i = index_of(name);
  const SafetensorsEntry& e = entries_[i];
  ACC_CHECK(filled_[i] + bytes <= e.end - e.begin, "safetensors '", path_.string(), "': \"", name,
            "\" holds ", e.end - e.begin, " bytes; ", filled_[i] + bytes, " were written");
  write_all(fd_, data, bytes, data_start_ + e.begin + filled_[i], path_.string());
  crc_[i] = io::crc32(data, bytes, crc_[i]);
  filled_[i] += bytes;
  written_[i] = filled_[i] == e.end - e.begin;
}

uint32_t SafetensorsWriter::crc32(const std::string& name) const {
  const size_t i = index_of(name);
  ACC_CHECK(written_[i], "safetensors '", path_.string(), "': \"", name, "\" was not written yet");
  return crc_[i];
}

void SafetensorsWriter::finish() {
  const std::string file = path_.string();
  ACC_CHECK(fd_ >= 0, "safetensors '", file, "': finish() called twice");
  for (size_t i = 0; i < entries_.size(); ++i)
    ACC_CHECK(written_[i], "safetensors '", file, "': tensor \"", entries_[i].name,
              "\" was declared but never written");
  // A file with no data still needs its (empty) data section to exist: nothing to write.
  ACC_CHECK(::fsync(fd_) == 0, "safetensors '", file, "': fsync failed (", std::strerror(errno),
            ")");
  const int fd = fd_;
  fd_ = -1;
  ACC_CHECK(::close(fd) == 0, "safetensors '", file, "': close failed (", std::strerror(errno), ")");
  std::error_code ec;
  std::filesystem::rename(temp_, path_, ec);
  if (ec) ::unlink(temp_.c_str());
  ACC_CHECK(!ec, "safetensors '", file, "': cannot rename '", temp_.string(), "' into place (",
            ec.message(), ")");
}

}  // namespace acc::io
