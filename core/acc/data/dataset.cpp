#include "acc/data/dataset.h"

namespace acc::data {

const Tensor& Batch::operator[](const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    std::string present;
    for (const auto& [key, value] : tensors_) present += (present.empty() ? "" : ", ") + key;
    ACC_FAIL("Batch: no field \"", name, "\" (fields: ", present.empty() ? "none" : present, ")");
  }
  return it->second;
}

int64_t Batch::rows() const {
  if (tensors_.empty()) return 0;
  const Tensor& first = tensors_.begin()->second;
  return first.dim() == 0 ? 1 : first.size(0);
}

void check_indices(std::span<const int64_t> indices, int64_t size, const char* dataset) {
  for (int64_t i : indices)
    ACC_CHECK(i >= 0 && i < size, dataset, ": sample index ", i, " is outside [0, ", size, ")");
}

}  // namespace acc::data
