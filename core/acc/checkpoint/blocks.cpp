#include "acc/checkpoint/blocks.h"

#include <algorithm>

#include "acc/memory/allocator.h"

namespace acc::checkpoint {

void for_each_block(const Tensor& t, int64_t block_elements,
                    const std::function<void(const Tensor& block, int64_t at)>& use) {
  const int64_t n = t.numel();
  const Tensor flat = t.view({n});
  const bool in_files = t.storage()->tier() == memory::Tier::file;
  Tensor buffer;
  if (in_files) {
    memory::CategoryScope scope(memory::Category::checkpoint);
    buffer = Tensor::empty({std::min(block_elements, n)}, t.dtype());
  }
  for (int64_t at = 0; at < n; at += block_elements) {
    const Tensor block = flat.narrow(at, std::min(block_elements, n - at));
    if (!in_files) {
      use(block, at);
      continue;
    }
    memory::read_block(block.raw_data(), block.nbytes(), buffer.raw_data(), memory::Tier::file);
    use(buffer.narrow(0, block.numel()), at);
  }
}

}  // namespace acc::checkpoint
