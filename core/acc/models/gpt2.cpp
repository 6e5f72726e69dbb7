#include "acc/models/gpt2.h"

#include <cmath>

#include "acc/nn/init.h"
#include "acc/ops/ops.h"

namespace acc::models {

GPT2Config GPT2Config::tiny() {
  GPT2Config c;
  c.n_positions = 256;
  c.n_embd = 128;
  c.n_layer = 4;
  c.n_head = 4;
  return c;
}

GPT2Config GPT2Config::small() { return GPT2Config{}; }

namespace {

// small() with another width, depth and head count: how transformers' larger GPT-2s differ.
GPT2Config widened(int64_t n_embd, int64_t n_layer, int64_t n_head) {
  GPT2Config c;
  c.n_embd = n_embd;
  c.n_layer = n_layer;
  c.n_head = n_head;
  return c;
}

}  // namespace

GPT2Config GPT2Config::medium() { return widened(1024, 24, 16); }
GPT2Config GPT2Config::large() { return widened(1280, 36, 20); }
GPT2Config GPT2Config::xl() { return widened(1600, 48, 25); }

void GPT2Config::validate() const {
  ACC_CHECK(vocab_size > 0 && n_positions > 0 && n_embd > 0 && n_layer > 0 && n_head > 0,
            "GPT2Config: vocab_size ", vocab_size, ", n_positions ", n_positions, ", n_embd ",
            n_embd, ", n_layer ", n_layer, ", n_head ", n_head, " must all be positive");
  ACC_CHECK(n_embd % n_head == 0, "GPT2Config: n_embd ", n_embd, " must be divisible by n_head ",
            n_head);
  ACC_CHECK(layer_norm_epsilon > 0 && initializer_range > 0,
            "GPT2Config: layer_norm_epsilon and initializer_range must be positive");
}

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// GPT-2 scales the init of the projections that write into the residual stream by
// 1/sqrt(2 * n_layer), so the stream's variance does not grow with depth.
float residual_std(const GPT2Config& c) {
  return c.initializer_range / std::sqrt(2.f * static_cast<float>(c.n_layer));
}

}  // namespace

GPT2Attention::GPT2Attention(const GPT2Config& c)
    : nn::Module(kTypeName), head_dim_(c.n_embd / c.n_head) {
  c_attn_ = register_module("c_attn", std::make_shared<Linear>(c.n_embd, 3 * c.n_embd, true,
                                                                c.initializer_range));
  c_proj_ = register_module("c_proj",
                            std::make_shared<Linear>(c.n_embd, c.n_embd, true, residual_std(c)));
}

Tensor GPT2Attention::forward(const Tensor& x) {
  Tensor packed = (*c_attn_)(x);  // q, k, v side by side (of the heads this rank holds)
  const int64_t W = packed.size(-1) / 3;
  auto qkv = ops::split(packed, {W, W, W}, -1);
  Tensor y = ops::causal_attention(split_heads(qkv[0], head_dim_), split_heads(qkv[1], head_dim_),
                                   split_heads(qkv[2], head_dim_));
  return (*c_proj_)(merge_heads(y));
}

GPT2MLP::GPT2MLP(const GPT2Config& c) : nn::Module(kTypeName) {
  c_fc_ = register_module("c_fc", std::make_shared<Linear>(c.n_embd, 4 * c.n_embd, true,
                                                            c.initializer_range));
  c_proj_ = register_module("c_proj",
                            std::make_shared<Linear>(4 * c.n_embd, c.n_embd, true, residual_std(c)));
}

Tensor GPT2MLP::forward(const Tensor& x) { return (*c_proj_)(ops::gelu((*c_fc_)(x))); }

GPT2Block::GPT2Block(const GPT2Config& c) : nn::Module(kTypeName) {
  ln_1_ = register_module("ln_1", std::make_shared<nn::LayerNorm>(c.n_embd, c.layer_norm_epsilon));
  attn_ = register_module("attn", std::make_shared<GPT2Attention>(c));
  ln_2_ = register_module("ln_2", std::make_shared<nn::LayerNorm>(c.n_embd, c.layer_norm_epsilon));
  mlp_ = register_module("mlp", std::make_shared<GPT2MLP>(c));
}

Tensor GPT2Block::forward(const Tensor& x) {
  Tensor h = ops::add(x, (*attn_)((*ln_1_)(x)));
  return ops::add(h, (*mlp_)((*ln_2_)(h)));
}

GPT2::GPT2(const GPT2Config& config, uint64_t seed) : CausalLM("GPT2LMHeadModel"), config_(config) {
  config_.validate();
  const GPT2Config& c = config_;
  transformer_ = register_module("transformer", std::make_shared<nn::Module>("GPT2Model"));
  wte_ = transformer_->register_module(
      "wte", std::make_shared<Embedding>(c.vocab_size, c.n_embd, c.initializer_range));
  wpe_ = transformer_->register_module(
      "wpe", std::make_shared<Embedding>(c.n_positions, c.n_embd, c.initializer_range));
  h_ = transformer_->register_module("h", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.n_layer; ++i) h_->append(std::make_shared<GPT2Block>(c));
  ln_f_ = transformer_->register_module(
      "ln_f", std::make_shared<nn::LayerNorm>(c.n_embd, c.layer_norm_epsilon));
  nn::init_parameters(*this, seed);
}

Tensor GPT2::embed(const Tensor& input_ids) {
  check_input_ids(input_ids);
  const int64_t T = input_ids.size(1);
  std::vector<int32_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  return ops::add((*wte_)(input_ids), (*wpe_)(Tensor::from_vector_i32(positions, {T})));
}

double GPT2::train_flops_per_token(int64_t seq_len) const {
  // 6 N (forward 2N, backward 4N) over the parameters used in products — all but the position
  // table; the tied wte counts once, as the head — plus attention's QK^T and AV: 12 L T C
  // (PaLM's convention, counting the full T x T score matrix although it is causal).
  const double n = static_cast<double>(num_parameters() - config_.n_positions * config_.n_embd);
  return 6.0 * n + 12.0 * static_cast<double>(config_.n_layer * seq_len * config_.n_embd);
}

std::string GPT2::name_from_file(const std::string& file_name) const {
  // The original Hugging Face "gpt2" files name GPT2Model's parameters without the prefix.
  if (file_name.starts_with("transformer.") || file_name.starts_with("lm_head.")) return file_name;
  return "transformer." + file_name;
}

Structure GPT2::structure() const {
  Structure s{.block_types = {GPT2Block::kTypeName},
              .shared_parameters = {"transformer.wte.weight"},
              .token_embedding = "transformer.wte",
              .chain = {.embedding = {"transformer.wte", "transformer.wpe"},
                        .head = {"transformer.ln_f", "transformer.wte"},
                        .branches = {{"ln_1", "attn"}, {"ln_2", "mlp"}}}};  // as GPT2Block::forward runs them
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    const std::string block = "transformer.h." + std::to_string(i);
    s.chain.layers.push_back(block);
    const std::string attn = block + ".attn", mlp = block + ".mlp";
    s.packed[attn + ".c_attn.weight"] = s.packed[attn + ".c_attn.bias"] = 3;
    s.split_together.push_back(
        {attn, {{attn + ".c_attn.weight", 0, config_.n_head}, {attn + ".c_proj.weight", 1, config_.n_head}}});
    s.split_together.push_back({mlp, {{mlp + ".c_fc.weight", 0, 0}, {mlp + ".c_proj.weight", 1, 0}}});
  }
  return s;
}

bool GPT2::stored_transposed(const std::string& name) const {
  return ends_with(name, ".attn.c_attn.weight") || ends_with(name, ".attn.c_proj.weight") ||
         ends_with(name, ".mlp.c_fc.weight") || ends_with(name, ".mlp.c_proj.weight");
}

bool GPT2::ignored_in_file(const std::string& name) const {
  // Causal-mask buffers of older transformers versions, and a head that is tied to wte.
  return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias") ||
         name == "lm_head.weight";
}

}  // namespace acc::models
