#pragma once
// Whole-model weights in .safetensors files with Hugging Face names AND layout: acc's own files
// store GPT-2's Conv1D weights (c_attn, c_proj, c_fc) as [in, out] like transformers does, so
// a file saved by acc opens in transformers (metadata format "pt") and a Hugging Face GPT-2 or
// Llama file loads into acc. The model says what differs (Model::stored_transposed, ...).
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "acc/models/model.h"

namespace acc::models {

void save_model(const Model& model, const std::filesystem::path& path);

// What a file does not match: empty when every parameter has an entry of the right shape.
struct LoadProblems {
  std::vector<std::string> missing;     // parameters without an entry in the file
  std::vector<std::string> unexpected;  // file entries that are no parameter of the model
  std::vector<std::string> mismatched;  // "name: file f32[3, 4], model expects [4, 3]"
  bool empty() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  // One per line, the first 8 of each kind and how many more; `source` names what the
  // parameters were compared with.
  std::string describe(std::string_view source = "the file") const;
};

LoadProblems check_model_file(const Model& model, const std::filesystem::path& path);

// Copies every parameter from the file (converting bf16 entries to the parameter's dtype). Any
// problem — all of them reported in one acc::Error — leaves the model untouched.
void load_model(Model& model, const std::filesystem::path& path);

}  // namespace acc::models
