#pragma once
// Datasets and batches. A Dataset hands out whole batches (the samples at a list of indices,
// stacked along a new first dimension) so each one is built with a single allocation per field.
#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "acc/tensor/tensor.h"

namespace acc::data {

// Named tensors of one batch, e.g. "input_ids" i32[B, T] and "labels" i32[B, T], or
// "images" f32[B, 1, 28, 28] and "labels" i32[B].
class Batch {
 public:
  void set(const std::string& name, Tensor tensor) { tensors_[name] = std::move(tensor); }
  bool contains(const std::string& name) const { return tensors_.count(name) > 0; }
  const Tensor& operator[](const std::string& name) const;  // throws naming the fields present
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  // Number of samples: the first dimension shared by all fields (0 for an empty batch).
  int64_t rows() const;

 private:
  std::map<std::string, Tensor> tensors_;
};

// What makes an epoch's random choices reproducible: datasets with random content (token
// windows) derive them from (seed, epoch, sample index) only.
struct EpochKey {
  uint64_t seed = 0;
  int64_t epoch = 0;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The samples at `indices` (each in [0, size())), stacked. Must be safe to call from another
  // thread than the one that built the dataset (the loader's prefetch thread).
  virtual Batch get_batch(std::span<const int64_t> indices, const EpochKey& key) const = 0;
};

// Throws acc::Error naming `dataset` if an index is outside [0, size).
void check_indices(std::span<const int64_t> indices, int64_t size, const char* dataset);

}  // namespace acc::data
