// train_llama: a Llama-architecture model on GPT-2 token files (by default the Brown corpus).
//   ./build/bin/train_llama --config tiny --steps 300      (--help lists every option)
#include <memory>

#include "acc/models/llama.h"
#include "acc/train/lm_program.h"

int main(int argc, char** argv) {
  return acc::train::lm_main(argc, argv, "train_llama", [](const std::string& config, uint64_t seed) {
    return std::make_shared<acc::models::Llama>(acc::models::LlamaConfig::from_name_or_file(config), seed);
  });
}
