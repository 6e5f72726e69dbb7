#pragma once
// A tensor's elements a block at a time, for saving and loading: views of its own memory, or,
// for state in the file tier (fsdp_offload_dir), copies read from its file into one buffer, so
// that no page of it is mapped in (each a fault, costly on a paravirtualised MMU) and only one
// block is held beside it. Internal to acc::checkpoint (save.cpp, load.cpp).
#include <cstdint>
#include <functional>

#include "acc/tensor/tensor.h"

namespace acc::checkpoint {

// use(block, at) for elements [at, at + block.numel()) of the contiguous tensor `t`, flattened,
// in blocks of at most `block_elements`; the file tier's buffer counts under
// Category::checkpoint.
void for_each_block(const Tensor& t, int64_t block_elements,
                    const std::function<void(const Tensor& block, int64_t at)>& use);

}  // namespace acc::checkpoint
