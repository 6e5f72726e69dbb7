#pragma once
// IDX files, the format of MNIST and Fashion-MNIST: big-endian magic 0x000008NN (0x08 =
// unsigned bytes, NN = number of dimensions), NN big-endian uint32 dimensions, then the bytes.
// Files may be gzip-compressed (as Debian's dataset-fashion-mnist ships them); that is
// detected from the content, not the name.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "acc/data/dataset.h"

namespace acc::data {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;  // row-major, prod(dims) bytes
};

IdxArray read_idx(const std::filesystem::path& path);
// Writes an unsigned-byte IDX file (gzip-compressed if `gzip`), through a temporary file.
void write_idx(const std::filesystem::path& path, const IdxArray& array, bool gzip = false);

// An image classification set from an IDX image file [N, rows, cols] and an IDX label file [N].
// Batches hold "images" f32[B, 1, rows, cols] with pixels scaled to [0, 1] and "labels" i32[B].
class MnistDataset : public Dataset {
 public:
  MnistDataset(const std::filesystem::path& images, const std::filesystem::path& labels);
  // Fashion-MNIST as installed by Debian's dataset-fashion-mnist (scripts/fetch-data).
  static MnistDataset fashion_mnist(bool train,
                                    const std::filesystem::path& dir = "/usr/share/datasets/fashion-mnist");

  int64_t size() const override { return count_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  Batch get_batch(std::span<const int64_t> indices, const EpochKey& key) const override;

 private:
  std::shared_ptr<const std::vector<uint8_t>> pixels_;  // shared: copies share the images
  std::shared_ptr<const std::vector<uint8_t>> labels_;
  int64_t count_ = 0, rows_ = 0, cols_ = 0;
};

}  // namespace acc::data
