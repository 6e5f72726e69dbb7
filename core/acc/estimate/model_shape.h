#pragma once
// The sizes of a model that decide its memory: parameter counts per FSDP unit and, for the
// transformers acc ships, the dimensions activations scale with. Built from a preset, a model
// config YAML, a safetensors file or a live model, without allocating the model.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace acc::models {
struct GPT2Config;
struct LlamaConfig;
class Model;
}  // namespace acc::models

namespace acc::estimate {

enum class Family { gpt2, llama, other };  // other: no activation model, parameters only

struct ModelShape {
  Family family = Family::other;
  int64_t parameters = 0;        // elements of every parameter
  int64_t block_parameters = 0;  // one transformer block (the unit a transformer wrap makes)
  int64_t layers = 0;            // blocks; root = parameters - layers * block_parameters
  int64_t hidden = 0, heads = 0, kv_hidden = 0, intermediate = 0, vocab = 0;
  int64_t largest_block_matrix = 0;  // elements of a block's largest weight
  // Builds the model with deferred parameters (shapes, no memory), for an estimate that places
  // it parameter by parameter (SPMD's sharding rules). Empty when only the counts are known.
  std::function<std::shared_ptr<models::Model>()> deferred_model{};

  int64_t root_parameters() const { return parameters - layers * block_parameters; }
  // What one of `model_ranks` tensor-parallel ranks computes: its heads, kv width and MLP width
  // (at least one each) and, when the head is split too, its vocabulary rows.
  ModelShape on_model_rank(int model_ranks, bool vocabulary_split) const;

  static ModelShape of(const models::GPT2Config& c);
  static ModelShape of(const models::LlamaConfig& c);
  // GPT-2 and Llama by their configs; any other model by its parameter count only.
  static ModelShape of(const models::Model& model);
  // "gpt2-tiny", "gpt2" (small), "gpt2-medium", "gpt2-large", "gpt2-xl", "llama-tiny",
  // "llama-small"; a model config YAML (Hugging Face config.json keys: n_embd... for GPT-2,
  // hidden_size... for Llama); or a safetensors file with GPT-2 or Llama parameter names.
  static ModelShape from_name(const std::string& name_or_path);
};

std::string to_string(Family f);

}  // namespace acc::estimate
