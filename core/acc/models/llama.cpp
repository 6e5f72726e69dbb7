#include "acc/models/llama.h"

#include "acc/nn/init.h"
#include "acc/ops/ops.h"

namespace acc::models {

LlamaConfig LlamaConfig::tiny() {
  LlamaConfig c;
  c.hidden_size = 128;
  c.intermediate_size = 352;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 256;
  return c;
}

LlamaConfig LlamaConfig::small() { return LlamaConfig{}; }

void LlamaConfig::validate() const {
  ACC_CHECK(vocab_size > 0 && hidden_size > 0 && intermediate_size > 0 && num_hidden_layers > 0 &&
                num_attention_heads > 0 && num_key_value_heads > 0 && max_position_embeddings > 0,
            "LlamaConfig: vocab_size ", vocab_size, ", hidden_size ", hidden_size,
            ", intermediate_size ", intermediate_size, ", num_hidden_layers ", num_hidden_layers,
            ", num_attention_heads ", num_attention_heads, ", num_key_value_heads ",
            num_key_value_heads, ", max_position_embeddings ", max_position_embeddings,
            " must all be positive");
  ACC_CHECK(hidden_size % num_attention_heads == 0 && head_dim() % 2 == 0,
            "LlamaConfig: hidden_size ", hidden_size, " must split into num_attention_heads ",
            num_attention_heads, " heads of even size (rotary pairs)");
  ACC_CHECK(num_attention_heads % num_key_value_heads == 0, "LlamaConfig: num_attention_heads ",
            num_attention_heads, " must be a multiple of num_key_value_heads ", num_key_value_heads);
  ACC_CHECK(rms_norm_eps > 0 && rope_theta > 0 && initializer_range > 0,
            "LlamaConfig: rms_norm_eps, rope_theta and initializer_range must be positive");
}

namespace {

std::shared_ptr<Linear> projection(const LlamaConfig& c, int64_t in, int64_t out) {
  return std::make_shared<Linear>(in, out, /*bias=*/false, c.initializer_range);
}

}  // namespace

LlamaAttention::LlamaAttention(const LlamaConfig& c)
    : nn::Module(kTypeName),
      head_dim_(c.head_dim()),
      rope_theta_(c.rope_theta) {
  const int64_t C = c.hidden_size, kv = c.num_key_value_heads * c.head_dim();
  q_proj_ = register_module("q_proj", projection(c, C, C));
  k_proj_ = register_module("k_proj", projection(c, C, kv));
  v_proj_ = register_module("v_proj", projection(c, C, kv));
  o_proj_ = register_module("o_proj", projection(c, C, C));
}

Tensor LlamaAttention::forward(const Tensor& x) {
  Tensor q = ops::rope(split_heads((*q_proj_)(x), head_dim_), rope_theta_);
  Tensor k = ops::rope(split_heads((*k_proj_)(x), head_dim_), rope_theta_);
  Tensor v = split_heads((*v_proj_)(x), head_dim_);
  return (*o_proj_)(merge_heads(ops::causal_attention(q, k, v)));
}

LlamaMLP::LlamaMLP(const LlamaConfig& c) : nn::Module(kTypeName) {
  gate_proj_ = register_module("gate_proj", projection(c, c.hidden_size, c.intermediate_size));
  up_proj_ = register_module("up_proj", projection(c, c.hidden_size, c.intermediate_size));
  down_proj_ = register_module("down_proj", projection(c, c.intermediate_size, c.hidden_size));
}

Tensor LlamaMLP::forward(const Tensor& x) {
  return (*down_proj_)(ops::swiglu((*gate_proj_)(x), (*up_proj_)(x)));
}

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& c) : nn::Module(kTypeName) {
  self_attn_ = register_module("self_attn", std::make_shared<LlamaAttention>(c));
  mlp_ = register_module("mlp", std::make_shared<LlamaMLP>(c));
  input_layernorm_ = register_module("input_layernorm",
                                     std::make_shared<nn::RMSNorm>(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm_ = register_module(
      "post_attention_layernorm", std::make_shared<nn::RMSNorm>(c.hidden_size, c.rms_norm_eps));
}

Tensor LlamaDecoderLayer::forward(const Tensor& x) {
  Tensor h = ops::add(x, (*self_attn_)((*input_layernorm_)(x)));
  return ops::add(h, (*mlp_)((*post_attention_layernorm_)(h)));
}

Llama::Llama(const LlamaConfig& config, uint64_t seed) : CausalLM("LlamaForCausalLM"), config_(config) {
  config_.validate();
  const LlamaConfig& c = config_;
  model_ = register_module("model", std::make_shared<nn::Module>("LlamaModel"));
  embed_tokens_ = model_->register_module(
      "embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, c.initializer_range));
  layers_ = model_->register_module("layers", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    layers_->append(std::make_shared<LlamaDecoderLayer>(c));
  norm_ = model_->register_module("norm", std::make_shared<nn::RMSNorm>(c.hidden_size, c.rms_norm_eps));
  lm_head_ = register_module("lm_head", projection(c, c.hidden_size, c.vocab_size));
  nn::init_parameters(*this, seed);
}

Tensor Llama::embed(const Tensor& input_ids) {
  check_input_ids(input_ids);
  return (*embed_tokens_)(input_ids);
}

double Llama::train_flops_per_token(int64_t seq_len) const {
  // 6 N over the parameters used in products (all but the embedding lookup table), plus
  // attention's 12 L T C (PaLM's convention; see GPT2::train_flops_per_token).
  const double n =
      static_cast<double>(num_parameters() - config_.vocab_size * config_.hidden_size);
  return 6.0 * n + 12.0 * static_cast<double>(config_.num_hidden_layers * seq_len *
                                              config_.hidden_size);
}

Structure Llama::structure() const {
  const int64_t heads = config_.num_attention_heads, kv_heads = config_.num_key_value_heads;
  Structure s{.block_types = {LlamaDecoderLayer::kTypeName},
              .shared_parameters = {"lm_head.weight"},
              .token_embedding = "model.embed_tokens",
              .chain = {.embedding = {"model.embed_tokens"},
                        .head = {"model.norm", "lm_head"},
                        // as LlamaDecoderLayer::forward runs them
                        .branches = {{"input_layernorm", "self_attn"}, {"post_attention_layernorm", "mlp"}}}};
  auto& groups = s.split_together;
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    const std::string layer = "model.layers." + std::to_string(i);
    s.chain.layers.push_back(layer);
    const std::string attn = layer + ".self_attn", mlp = layer + ".mlp";
    groups.push_back({attn, {{attn + ".q_proj.weight", 0, heads}, {attn + ".k_proj.weight", 0, kv_heads},
                             {attn + ".v_proj.weight", 0, kv_heads}, {attn + ".o_proj.weight", 1, heads}}});
    groups.push_back({mlp, {{mlp + ".gate_proj.weight", 0, 0}, {mlp + ".up_proj.weight", 0, 0},
                            {mlp + ".down_proj.weight", 1, 0}}});
  }
  return s;
}

bool Llama::ignored_in_file(const std::string& name) const {
  // Rotary tables some transformers versions saved as buffers.
  return name.ends_with(".rotary_emb.inv_freq");
}

}  // namespace acc::models
