#include "merge_weights_command.h"

#include <iostream>

#include "acc/checkpoint/checkpoint.h"
#include "acc/util/error.h"

namespace acc::cli {

namespace {

constexpr const char* kUsage = R"(usage: accelerate merge-weights CHECKPOINT_DIR OUT.safetensors [--dtype f32|bf16]

Writes the parameters of a checkpoint (sharded or full, saved at any number of ranks) to one
.safetensors file with Hugging Face names and layout, which transformers opens. Every shard's
checksum is verified; at most one tensor is held in memory. --dtype defaults to f32.
)";

}  // namespace

int run_merge_weights(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  DType dtype = DType::f32;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (args[i] == "--dtype") {
      ACC_CHECK(i + 1 < args.size(), "--dtype needs a value: f32 or bf16");
      const std::string& v = args[++i];
      ACC_CHECK(v == "f32" || v == "bf16" || v == "fp32", "--dtype: expected f32 or bf16, got '", v, "'");
      dtype = v == "bf16" ? DType::bf16 : DType::f32;
    } else {
      ACC_CHECK(args[i].rfind("--", 0) != 0, "unknown option '", args[i], "'\n", kUsage);
      positional.push_back(args[i]);
    }
  }
  ACC_CHECK(positional.size() == 2, "expected CHECKPOINT_DIR and OUT.safetensors\n", kUsage);
  checkpoint::merge_weights(positional[0], positional[1], dtype);
  std::cout << "merged " << positional[0] << " into " << positional[1] << " ("
            << dtype_name(dtype) << ")\n";
  return 0;
}

}  // namespace acc::cli
