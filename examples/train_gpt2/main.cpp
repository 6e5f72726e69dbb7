// train_gpt2: GPT-2 on a token file (by default the Brown corpus from scripts/fetch-data).
//   ./build/bin/train_gpt2 --config tiny --steps 300      (--help lists every option)
#include <memory>

#include "acc/models/gpt2.h"
#include "acc/train/lm_program.h"

int main(int argc, char** argv) {
  return acc::train::lm_main(argc, argv, "train_gpt2", [](const std::string& config, uint64_t seed) {
    return std::make_shared<acc::models::GPT2>(acc::models::GPT2Config::from_name_or_file(config), seed);
  });
}
