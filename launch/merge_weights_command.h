#pragma once
// accelerate merge-weights CHECKPOINT_DIR OUT.safetensors [--dtype f32|bf16]
#include <string>
#include <vector>

namespace acc::cli {

int run_merge_weights(const std::vector<std::string>& args);

}  // namespace acc::cli
