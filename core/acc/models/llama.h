#pragma once
// Llama with the Hugging Face parameter names (model.embed_tokens.weight,
// model.layers.{i}.self_attn.q_proj.weight, ..., model.norm.weight, lm_head.weight): RMSNorm
// pre-norm blocks of type "LlamaDecoderLayer", rotary position embeddings (Hugging Face's
// rotate-half convention, so its q/k weights load as they are), a SwiGLU MLP, optional
// grouped-query attention (num_key_value_heads < num_attention_heads), no biases, untied head.
#include <cstdint>
#include <memory>
#include <string>

#include "acc/models/layers.h"
#include "acc/models/model.h"
#include "acc/nn/containers.h"

namespace acc::models {

struct LlamaConfig {
  int64_t vocab_size = 50257;  // GPT-2's tokenizer, so the Brown token files train it
  int64_t hidden_size = 768;
  int64_t intermediate_size = 2048;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t num_key_value_heads = 4;
  int64_t max_position_embeddings = 1024;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  float initializer_range = 0.02f;

  static LlamaConfig tiny();   // 4 layers, 128 wide, 4 heads over 2 key/value heads
  static LlamaConfig small();  // the defaults above: about 124M parameters
  // "tiny" | "small", or a YAML file with the Hugging Face config.json keys above (omitted
  // keys keep small()'s values). Unknown names, keys or bad values throw.
  static LlamaConfig from_name_or_file(const std::string& name_or_path);
  void validate() const;
  int64_t head_dim() const { return hidden_size / num_attention_heads; }
};

class LlamaAttention : public nn::Module {
 public:
  static constexpr const char* kTypeName = "LlamaAttention";
  explicit LlamaAttention(const LlamaConfig& c);
  Tensor forward(const Tensor& x) override;  // [B, T, C] -> [B, T, C]

 private:
  int64_t head_dim_;
  double rope_theta_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, o_proj_;
};

// down(silu(gate(x)) * up(x)).
class LlamaMLP : public nn::Module {
 public:
  static constexpr const char* kTypeName = "LlamaMLP";
  explicit LlamaMLP(const LlamaConfig& c);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<Linear> gate_proj_, up_proj_, down_proj_;
};

class LlamaDecoderLayer : public nn::Module {
 public:
  static constexpr const char* kTypeName = "LlamaDecoderLayer";
  explicit LlamaDecoderLayer(const LlamaConfig& c);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<nn::RMSNorm> input_layernorm_, post_attention_layernorm_;
  std::shared_ptr<LlamaAttention> self_attn_;
  std::shared_ptr<LlamaMLP> mlp_;
};

// The decoder lives under a child "model" (type "LlamaModel"), as in LlamaForCausalLM.
class Llama : public CausalLM {
 public:
  explicit Llama(const LlamaConfig& config, uint64_t seed = 0);
  Tensor embed(const Tensor& input_ids) override;
  nn::ModuleList& layers() const override { return *layers_; }
  Tensor final_norm(const Tensor& hidden) override { return (*norm_)(hidden); }
  Tensor head_weight() override { return lm_head_->param("weight"); }
  // Blocks LlamaDecoderLayer; lm_head's weight is read by the loss, not through lm_head's call.
  Structure structure() const override;
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_seq_len() const override { return config_.max_position_embeddings; }
  double train_flops_per_token(int64_t seq_len) const override;
  const LlamaConfig& config() const { return config_; }
  bool ignored_in_file(const std::string& name) const override;

 private:
  LlamaConfig config_;
  std::shared_ptr<nn::Module> model_;
  std::shared_ptr<Embedding> embed_tokens_;
  std::shared_ptr<nn::ModuleList> layers_;
  std::shared_ptr<nn::RMSNorm> norm_;
  std::shared_ptr<Linear> lm_head_;  // holds the head's parameter (HF's name); see head_weight()
};

}  // namespace acc::models
