#include "acc/estimate/model_shape.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "acc/io/safetensors.h"
#include "acc/models/gpt2.h"
#include "acc/models/llama.h"
#include "acc/nn/deferred_init.h"
#include "acc/util/error.h"

namespace acc::estimate {

std::string to_string(Family f) {
  switch (f) {
    case Family::gpt2: return "gpt2";
    case Family::llama: return "llama";
    case Family::other: break;
  }
  return "other";
}

ModelShape ModelShape::of(const models::GPT2Config& c) {
  const int64_t C = c.n_embd;
  ModelShape s;
  s.family = Family::gpt2;
  s.layers = c.n_layer;
  s.hidden = C;
  s.heads = c.n_head;
  s.kv_hidden = C;
  s.intermediate = 4 * C;
  s.vocab = c.vocab_size;
  // ln_1, ln_2 (2C each); c_attn 3C^2 + 3C; c_proj C^2 + C; c_fc 4C^2 + 4C; mlp.c_proj 4C^2 + C.
  s.block_parameters = 12 * C * C + 13 * C;
  s.largest_block_matrix = 4 * C * C;
  // wte (tied to the head), wpe, ln_f.
  s.parameters = s.layers * s.block_parameters + (c.vocab_size + c.n_positions) * C + 2 * C;
  s.deferred_model = [c] {
    nn::DeferredInit deferred;
    return std::make_shared<models::GPT2>(c);
  };
  return s;
}

ModelShape ModelShape::of(const models::LlamaConfig& c) {
  const int64_t C = c.hidden_size, kv = c.num_key_value_heads * c.head_dim(), I = c.intermediate_size;
  ModelShape s;
  s.family = Family::llama;
  s.layers = c.num_hidden_layers;
  s.hidden = C;
  s.heads = c.num_attention_heads;
  s.kv_hidden = kv;
  s.intermediate = I;
  s.vocab = c.vocab_size;
  // q, o (C^2 each), k, v (C kv each), gate, up, down (C I each), two RMSNorms.
  s.block_parameters = 2 * C * C + 2 * C * kv + 3 * C * I + 2 * C;
  s.largest_block_matrix = std::max(C * C, C * I);
  // embed_tokens, lm_head (untied), the final norm.
  s.parameters = s.layers * s.block_parameters + 2 * c.vocab_size * C + C;
  s.deferred_model = [c] {
    nn::DeferredInit deferred;
    return std::make_shared<models::Llama>(c);
  };
  return s;
}

ModelShape ModelShape::of(const models::Model& model) {
  if (const auto* gpt2 = dynamic_cast<const models::GPT2*>(&model)) return of(gpt2->config());
  if (const auto* llama = dynamic_cast<const models::Llama*>(&model)) return of(llama->config());
  ModelShape s;
  s.parameters = model.num_parameters();
  return s;
}

namespace {

models::GPT2Config gpt2_preset(int64_t n_embd, int64_t n_layer, int64_t n_head) {
  models::GPT2Config c;
  c.n_embd = n_embd;
  c.n_layer = n_layer;
  c.n_head = n_head;
  return c;
}

// The shape of a Hugging Face GPT-2 or Llama checkpoint, read from the tensors' names and
// shapes (heads are not stored: 64-wide heads are assumed; they only size a small term).
ModelShape from_safetensors(const std::string& path) {
  const io::SafetensorsReader reader(path);
  std::map<std::string, Shape> shapes;
  for (const auto& e : reader.entries()) shapes[e.name] = e.shape;
  auto find = [&](const std::string& suffix) -> const Shape* {
    for (const auto& [name, shape] : shapes)
      if (name.ends_with(suffix)) return &shape;
    return nullptr;
  };
  static const std::regex block_index(R"((?:^|\.)(?:h|layers)\.(\d+)\.)");
  std::set<int64_t> blocks;
  for (const auto& [name, shape] : shapes) {
    std::smatch m;
    if (std::regex_search(name, m, block_index)) blocks.insert(std::stoll(m[1].str()));
  }
  const auto layers = static_cast<int64_t>(blocks.size());
  if (const Shape* wte = find("wte.weight"); wte != nullptr && wte->size() == 2 && layers > 0) {
    models::GPT2Config c;
    c.vocab_size = (*wte)[0];
    c.n_embd = (*wte)[1];
    c.n_layer = layers;
    c.n_head = std::max<int64_t>(1, c.n_embd / 64);
    if (const Shape* wpe = find("wpe.weight"); wpe != nullptr && !wpe->empty()) c.n_positions = (*wpe)[0];
    return ModelShape::of(c);
  }
  const Shape* embed = find("embed_tokens.weight");
  const Shape* gate = find("mlp.gate_proj.weight");
  const Shape* k = find("self_attn.k_proj.weight");
  ACC_CHECK(embed != nullptr && gate != nullptr && k != nullptr && embed->size() == 2 && layers > 0,
            "estimate: ", path, " holds neither a GPT-2 (transformer.h.N.*, wte.weight) nor a Llama "
            "(model.layers.N.*, embed_tokens.weight) checkpoint");
  models::LlamaConfig c;
  c.vocab_size = (*embed)[0];
  c.hidden_size = (*embed)[1];
  c.num_hidden_layers = layers;
  c.intermediate_size = (*gate)[0];
  c.num_attention_heads = std::max<int64_t>(1, c.hidden_size / 64);
  c.num_key_value_heads = std::max<int64_t>(1, (*k)[0] / c.head_dim());
  return ModelShape::of(c);
}

// A model config YAML is GPT-2's when it uses GPT-2's key names.
bool is_gpt2_yaml(const std::string& path) {
  const YAML::Node root = YAML::LoadFile(path);
  if (!root.IsMap()) return false;
  for (const auto& item : root) {
    const auto key = item.first.as<std::string>();
    if (key == "n_embd" || key == "n_layer" || key == "n_head" || key == "n_positions") return true;
  }
  return false;
}

}  // namespace

ModelShape ModelShape::from_name(const std::string& name) {
  static const std::map<std::string, std::function<ModelShape()>> presets = {
      {"gpt2-tiny", [] { return of(models::GPT2Config::tiny()); }},
      {"gpt2", [] { return of(models::GPT2Config::small()); }},
      {"gpt2-small", [] { return of(models::GPT2Config::small()); }},
      {"gpt2-medium", [] { return of(models::GPT2Config::medium()); }},
      {"gpt2-large", [] { return of(gpt2_preset(1280, 36, 20)); }},
      {"gpt2-xl", [] { return of(gpt2_preset(1600, 48, 25)); }},
      {"llama-tiny", [] { return of(models::LlamaConfig::tiny()); }},
      {"llama-small", [] { return of(models::LlamaConfig::small()); }},
  };
  if (auto it = presets.find(name); it != presets.end()) return it->second();
  if (!std::filesystem::is_regular_file(name)) {
    std::string known;
    for (const auto& [preset, make] : presets) known += (known.empty() ? "" : ", ") + preset;
    ACC_FAIL("estimate: model '", name, "' is neither a preset (", known,
             ") nor an existing model config YAML or safetensors file");
  }
  if (name.ends_with(".safetensors")) return from_safetensors(name);
  try {
    return is_gpt2_yaml(name) ? of(models::GPT2Config::from_name_or_file(name))
                              : of(models::LlamaConfig::from_name_or_file(name));
  } catch (const YAML::Exception& e) {
    ACC_FAIL("estimate: model config ", name, ": not valid YAML: ", e.what());
  }
}

ModelShape ModelShape::on_model_rank(int model_ranks, bool vocabulary_split) const {
  ModelShape out = *this;
  if (model_ranks <= 1) return out;
  out.heads = std::max<int64_t>(1, heads / model_ranks);
  out.kv_hidden = std::max<int64_t>(1, kv_hidden / model_ranks);
  out.intermediate = std::max<int64_t>(1, intermediate / model_ranks);
  if (vocabulary_split) out.vocab = (vocab + model_ranks - 1) / model_ranks;
  return out;
}

}  // namespace acc::estimate
