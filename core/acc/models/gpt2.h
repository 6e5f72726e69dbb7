#pragma once
// GPT-2 with the Hugging Face parameter names and shapes (transformer.wte.weight,
// transformer.h.{i}.attn.c_attn.weight, ...), the output head tied to wte, pre-norm blocks of
// type "GPT2Block", GELU (tanh) MLPs, no dropout. acc's linear weights are [out, in]; Hugging
// Face's Conv1D stores [in, out], which models/checkpoint.h transposes on load and save.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "acc/models/layers.h"
#include "acc/models/model.h"
#include "acc/nn/containers.h"

namespace acc::models {

struct GPT2Config {
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;
  int64_t n_embd = 768;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  double layer_norm_epsilon = 1e-5;
  float initializer_range = 0.02f;

  static GPT2Config tiny();    // 4 layers, 128 wide, 256 positions: tests and quick runs
  static GPT2Config small();   // 124M (Hugging Face "gpt2")
  static GPT2Config medium();  // 355M ("gpt2-medium")
  static GPT2Config large();   // 774M ("gpt2-large")
  static GPT2Config xl();      // 1558M ("gpt2-xl"): 25 GB of f32 training state
  // "tiny" | "small" | "medium" | "large" | "xl", or a YAML file with the Hugging Face config.json keys above
  // (omitted keys keep small()'s values). Unknown names, keys or bad values throw.
  static GPT2Config from_name_or_file(const std::string& name_or_path);
  void validate() const;
};

class GPT2Attention : public nn::Module {
 public:
  static constexpr const char* kTypeName = "GPT2Attention";
  explicit GPT2Attention(const GPT2Config& c);
  Tensor forward(const Tensor& x) override;  // [B, T, C] -> [B, T, C]

 private:
  int64_t head_dim_;
  std::shared_ptr<Linear> c_attn_, c_proj_;
};

class GPT2MLP : public nn::Module {
 public:
  static constexpr const char* kTypeName = "GPT2MLP";
  explicit GPT2MLP(const GPT2Config& c);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<Linear> c_fc_, c_proj_;
};

// x + attn(ln_1(x)), then + mlp(ln_2(x)).
class GPT2Block : public nn::Module {
 public:
  static constexpr const char* kTypeName = "GPT2Block";
  explicit GPT2Block(const GPT2Config& c);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<nn::LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<GPT2Attention> attn_;
  std::shared_ptr<GPT2MLP> mlp_;
};

// The parameters live under a child "transformer" (type "GPT2Model"), as in GPT2LMHeadModel.
class GPT2 : public CausalLM {
 public:
  explicit GPT2(const GPT2Config& config, uint64_t seed = 0);
  Tensor embed(const Tensor& input_ids) override;  // wte + wpe
  nn::ModuleList& layers() const override { return *h_; }
  Tensor final_norm(const Tensor& hidden) override { return (*ln_f_)(hidden); }
  Tensor head_weight() override { return wte_->param("weight"); }  // tied
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_seq_len() const override { return config_.n_positions; }
  double train_flops_per_token(int64_t seq_len) const override;
  const GPT2Config& config() const { return config_; }

  std::string name_from_file(const std::string& file_name) const override;
  bool stored_transposed(const std::string& name) const override;
  bool ignored_in_file(const std::string& name) const override;
  // Blocks GPT2Block; the head is wte itself, read at the end of the forward; c_attn packs q,
  // k and v along its output features.
  Structure structure() const override;

 private:
  GPT2Config config_;
  std::shared_ptr<nn::Module> transformer_;
  std::shared_ptr<Embedding> wte_, wpe_;
  std::shared_ptr<nn::ModuleList> h_;
  std::shared_ptr<nn::LayerNorm> ln_f_;
};

}  // namespace acc::models
