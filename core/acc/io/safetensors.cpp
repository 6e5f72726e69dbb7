#include "acc/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include "acc/io/safetensors_header.h"
#include "acc/util/error.h"

namespace acc::io {

// Tensors are written and read as raw bytes, which is only the format's little-endian layout
// on a little-endian host.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little-endian");

namespace {

// The reference implementation rejects larger headers too; a bigger "length" is corruption.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

}  // namespace

void save_safetensors(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const SafetensorsMetadata& metadata) {
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, tensor] : tensors) {
    ACC_CHECK(tensor.defined(), "save_safetensors '", path.string(), "': tensor \"", name,
              "\" is undefined");
    entries.push_back({name, tensor.dtype(), tensor.shape()});
  }
  SafetensorsWriter writer(path, std::move(entries), metadata);
  for (const auto& [name, tensor] : tensors) writer.write(name, tensor.raw_data());
  writer.finish();
}

std::map<std::string, Tensor> load_safetensors(const std::filesystem::path& path) {
  SafetensorsReader reader(path);
  std::map<std::string, Tensor> out;
  for (const auto& e : reader.entries()) out.emplace(e.name, reader.read(e.name));
  return out;
}

SafetensorsReader::SafetensorsReader(const std::filesystem::path& path) : path_(path) {
  const std::string file = path.string();
  fd_ = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  ACC_CHECK(fd_ >= 0, "safetensors '", file, "': cannot open (", std::strerror(errno), ")");
  try {
    struct stat st {};
    ACC_CHECK(::fstat(fd_, &st) == 0, "safetensors '", file, "': cannot stat (",
              std::strerror(errno), ")");
    const auto file_size = static_cast<uint64_t>(st.st_size);
    ACC_CHECK(file_size >= 8, "safetensors '", file, "': ", file_size,
              " bytes is too short for the 8-byte header length");
    uint64_t header_len = 0;
    read_bytes(0, 8, &header_len);
    ACC_CHECK(header_len <= kMaxHeaderBytes, "safetensors '", file, "': header length ",
              header_len, " exceeds the limit of ", kMaxHeaderBytes, " bytes (not a safetensors file?)");
    ACC_CHECK(8 + header_len <= file_size, "safetensors '", file, "': header length ", header_len,
              " runs past the end of the ", file_size, "-byte file (truncated?)");
    std::string json(header_len, '\0');
    read_bytes(8, header_len, json.data());
    ACC_CHECK(header_len > 0 && json[0] == '{', "safetensors '", file,
              "': header does not start with '{' (not a safetensors file?)");
    data_start_ = 8 + header_len;
    auto parsed = safetensors_detail::parse_header(json, file_size - data_start_, file);
    entries_ = std::move(parsed.entries);
    metadata_ = std::move(parsed.metadata);
    for (size_t i = 0; i < entries_.size(); ++i) index_[entries_[i].name] = i;
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

SafetensorsReader::SafetensorsReader(SafetensorsReader&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      data_start_(other.data_start_),
      entries_(std::move(other.entries_)),
      index_(std::move(other.index_)),
      metadata_(std::move(other.metadata_)) {}

SafetensorsReader& SafetensorsReader::operator=(SafetensorsReader&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    data_start_ = other.data_start_;
    entries_ = std::move(other.entries_);
    index_ = std::move(other.index_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

bool SafetensorsReader::contains(const std::string& name) const { return index_.count(name) > 0; }

const SafetensorsEntry& SafetensorsReader::entry(const std::string& name) const {
  auto it = index_.find(name);
  ACC_CHECK(it != index_.end(), "safetensors '", path_.string(), "': no tensor named \"", name,
            "\" (the file has ", entries_.size(), " tensors)");
  return entries_[it->second];
}

Tensor SafetensorsReader::read(const std::string& name) const {
  const auto& e = entry(name);
  Tensor t = Tensor::empty(e.shape, e.dtype);
  read_bytes(data_start_ + e.begin, e.end - e.begin, t.raw_data());
  return t;
}

Tensor SafetensorsReader::read_range(const std::string& name, int64_t begin, int64_t end) const {
  const auto& e = entry(name);
  Tensor t = Tensor::empty({std::max<int64_t>(end - begin, 0)}, e.dtype);
  read_range_into(name, begin, end, t.raw_data());
  return t;
}

void SafetensorsReader::read_range_into(const std::string& name, int64_t begin, int64_t end,
                                        void* dst) const {
  const auto& e = entry(name);
  ACC_CHECK(begin >= 0 && begin <= end && end <= e.numel(), "safetensors '", path_.string(),
            "': element range [", begin, ", ", end, ") is outside \"", name, "\" ",
            dtype_name(e.dtype), shape_str(e.shape), " (", e.numel(), " elements)");
  const uint64_t size = dtype_size(e.dtype);
  read_bytes(data_start_ + e.begin + static_cast<uint64_t>(begin) * size,
             static_cast<uint64_t>(end - begin) * size, dst);
}

void SafetensorsReader::expect_sequential_reads() const {
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);  // only advice: a failure changes nothing
}

void SafetensorsReader::read_bytes(uint64_t file_offset, uint64_t count, void* dst) const {
  auto* out = static_cast<char*>(dst);
  while (count > 0) {
    const ssize_t got = ::pread(fd_, out, count, static_cast<off_t>(file_offset));
    if (got < 0 && errno == EINTR) continue;
    ACC_CHECK(got > 0, "safetensors '", path_.string(), "': reading ", count, " bytes at offset ",
              file_offset, " failed (", got < 0 ? std::strerror(errno) : "unexpected end of file",
              ")");
    out += got;
    file_offset += static_cast<uint64_t>(got);
    count -= static_cast<uint64_t>(got);
  }
}

}  // namespace acc::io
