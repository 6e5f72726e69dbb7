#include "acc/data/idx.h"

#include <Poco/Exception.h>
#include <Poco/DeflatingStream.h>
#include <Poco/InflatingStream.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include "acc/io/atomic_file.h"
#include "acc/util/error.h"

namespace acc::data {

namespace {

// The file's bytes, gunzipped when they start with the gzip magic 1f 8b.
std::vector<uint8_t> read_maybe_gzipped(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  ACC_CHECK(in.is_open(), "IDX file '", path.string(), "': cannot open (missing? run scripts/fetch-data)");
  std::vector<uint8_t> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (raw.size() < 2 || raw[0] != 0x1f || raw[1] != 0x8b) return raw;
  try {
    std::istringstream compressed(std::string(raw.begin(), raw.end()));
    Poco::InflatingInputStream inflate(compressed, Poco::InflatingStreamBuf::STREAM_GZIP);
    std::vector<uint8_t> out((std::istreambuf_iterator<char>(inflate)), std::istreambuf_iterator<char>());
    ACC_CHECK(!inflate.bad(), "IDX file '", path.string(), "': gzip data is corrupt or truncated");
    return out;
  } catch (const Poco::Exception& e) {
    ACC_FAIL("IDX file '", path.string(), "': gzip data is corrupt or truncated (", e.displayText(), ")");
  }
}

uint32_t big_endian_u32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

}  // namespace

IdxArray read_idx(const std::filesystem::path& path) {
  const std::vector<uint8_t> bytes = read_maybe_gzipped(path);
  const std::string name = path.string();
  ACC_CHECK(bytes.size() >= 4, "IDX file '", name, "': ", bytes.size(),
            " bytes is too short for the 4-byte magic");
  ACC_CHECK(bytes[0] == 0 && bytes[1] == 0 && bytes[2] == 0x08 && bytes[3] >= 1, "IDX file '", name,
            "': magic ", std::hex, big_endian_u32(bytes.data()), std::dec,
            " is not 0x000008NN (unsigned-byte IDX with NN >= 1 dimensions)");
  const size_t ndims = bytes[3];
  ACC_CHECK(bytes.size() >= 4 + 4 * ndims, "IDX file '", name, "': truncated inside the ", ndims,
            " dimension sizes");
  IdxArray array;
  uint64_t count = 1;
  for (size_t d = 0; d < ndims; ++d) {
    array.dims.push_back(big_endian_u32(bytes.data() + 4 + 4 * d));
    count *= static_cast<uint64_t>(array.dims.back());
  }
  const size_t offset = 4 + 4 * ndims;
  ACC_CHECK(bytes.size() - offset == count, "IDX file '", name, "': dimensions ",
            shape_str(array.dims), " need ", count, " bytes of data but the file has ",
            bytes.size() - offset, " (truncated?)");
  array.values.assign(bytes.begin() + static_cast<std::ptrdiff_t>(offset), bytes.end());
  return array;
}

void write_idx(const std::filesystem::path& path, const IdxArray& array, bool gzip) {
  ACC_CHECK(!array.dims.empty() && array.dims.size() < 256, "write_idx '", path.string(),
            "': needs 1 to 255 dimensions, got ", array.dims.size());
  ACC_CHECK(static_cast<int64_t>(array.values.size()) == shape_numel(array.dims), "write_idx '",
            path.string(), "': ", array.values.size(), " values do not fill dimensions ",
            shape_str(array.dims));
  std::string bytes = {0, 0, 0x08, static_cast<char>(array.dims.size())};
  for (int64_t d : array.dims) {
    ACC_CHECK(d >= 0 && d <= 0xffffffffLL, "write_idx '", path.string(), "': dimension ", d,
              " does not fit the format's uint32");
    for (int shift : {24, 16, 8, 0}) bytes += static_cast<char>((d >> shift) & 0xff);
  }
  bytes.append(array.values.begin(), array.values.end());
  io::write_file_atomically(path, [&](std::ostream& out) {
    if (!gzip) {
      out << bytes;
      return;
    }
    Poco::DeflatingOutputStream deflate(out, Poco::DeflatingStreamBuf::STREAM_GZIP);
    deflate << bytes;
    deflate.close();
  });
}

MnistDataset::MnistDataset(const std::filesystem::path& images, const std::filesystem::path& labels) {
  IdxArray im = read_idx(images);
  IdxArray lb = read_idx(labels);
  ACC_CHECK(im.dims.size() == 3, "MnistDataset: image file '", images.string(), "' has dimensions ",
            shape_str(im.dims), ", expected [N, rows, cols] (magic 0x00000803)");
  ACC_CHECK(lb.dims.size() == 1, "MnistDataset: label file '", labels.string(), "' has dimensions ",
            shape_str(lb.dims), ", expected [N] (magic 0x00000801)");
  ACC_CHECK(im.dims[0] == lb.dims[0], "MnistDataset: '", images.string(), "' has ", im.dims[0],
            " images but '", labels.string(), "' has ", lb.dims[0], " labels");
  count_ = im.dims[0];
  rows_ = im.dims[1];
  cols_ = im.dims[2];
  pixels_ = std::make_shared<const std::vector<uint8_t>>(std::move(im.values));
  labels_ = std::make_shared<const std::vector<uint8_t>>(std::move(lb.values));
}

MnistDataset MnistDataset::fashion_mnist(bool train, const std::filesystem::path& dir) {
  const std::string split = train ? "train" : "t10k";
  return MnistDataset(dir / (split + "-images-idx3-ubyte.gz"), dir / (split + "-labels-idx1-ubyte.gz"));
}

Batch MnistDataset::get_batch(std::span<const int64_t> indices, const EpochKey&) const {
  check_indices(indices, count_, "MnistDataset");
  const auto b = static_cast<int64_t>(indices.size());
  const int64_t pixels = rows_ * cols_;
  Tensor images = Tensor::empty({b, 1, rows_, cols_}, DType::f32);
  Tensor labels = Tensor::empty({b}, DType::i32);
  float* x = images.data<float>();
  int32_t* y = labels.data<int32_t>();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t i = indices[static_cast<size_t>(r)];
    const uint8_t* src = pixels_->data() + i * pixels;
    for (int64_t p = 0; p < pixels; ++p) x[r * pixels + p] = static_cast<float>(src[p]) / 255.f;
    y[r] = (*labels_)[static_cast<size_t>(i)];
  }
  Batch batch;
  batch.set("images", std::move(images));
  batch.set("labels", std::move(labels));
  return batch;
}

}  // namespace acc::data
