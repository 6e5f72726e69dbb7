// GPT2Config / LlamaConfig from a preset name or a YAML file of Hugging Face config.json keys.
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <variant>

#include "acc/models/gpt2.h"
#include "acc/models/llama.h"

namespace acc::models {

namespace {

using Field = std::variant<int64_t*, double*, float*>;

// Keys of config.json that describe the file rather than the architecture: accepted as they are.
bool describes_the_file(const std::string& key) {
  return key == "architectures" || key == "transformers_version" || key == "_name_or_path" || key == "torch_dtype";
}

// Reads every key of a YAML mapping into the named fields; `model_type`, when given, must be
// `model_type`. Anything else is an error naming the file, the key and the keys that are known.
void read_fields(const std::string& path, const std::string& model_type, const std::map<std::string, Field>& fields) {
  ACC_CHECK(std::filesystem::is_regular_file(path), "model config: '", path,
            "' is neither a known preset nor an existing YAML file");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    ACC_FAIL("model config ", path, ": not valid YAML: ", e.what());
  }
  ACC_CHECK(root.IsMap(), "model config ", path, ": expected a mapping of config keys");
  std::string known;
  for (const auto& [key, field] : fields) known += (known.empty() ? "" : ", ") + key;
  for (const auto& item : root) {
    const std::string key = item.first.as<std::string>();
    if (describes_the_file(key)) continue;
    if (key == "model_type") {
      const std::string given = item.second.IsScalar() ? item.second.Scalar() : "<not a scalar>";
      ACC_CHECK(given == model_type, "model config ", path, ": model_type '", given, "' is not '", model_type,
                "', the model this program builds");
      continue;
    }
    auto it = fields.find(key);
    ACC_CHECK(it != fields.end(), "model config ", path, ": unknown key '", key,
              "' (known keys: ", known, ", and model_type, architectures, transformers_version, "
              "_name_or_path, torch_dtype)");
    try {
      std::visit([&](auto* target) { *target = item.second.as<std::remove_pointer_t<decltype(target)>>(); },
                 it->second);
    } catch (const YAML::Exception&) {
      ACC_FAIL("model config ", path, ": key '", key, "' has a bad value '",
               item.second.IsScalar() ? item.second.Scalar() : std::string("<not a scalar>"),
               "' (expected a number)");
    }
  }
}

}  // namespace

GPT2Config GPT2Config::from_name_or_file(const std::string& name_or_path) {
  if (name_or_path == "tiny") return tiny();
  if (name_or_path == "small") return small();
  if (name_or_path == "medium") return medium();
  if (name_or_path == "large") return large();
  if (name_or_path == "xl") return xl();
  ACC_CHECK(name_or_path.find('.') != std::string::npos || name_or_path.find('/') != std::string::npos,
            "GPT2Config: unknown model '", name_or_path,
            "' (expected tiny, small, medium, large, xl or a YAML file)");
  GPT2Config c = small();
  read_fields(name_or_path, "gpt2", {{"vocab_size", &c.vocab_size},
                             {"n_positions", &c.n_positions},
                             {"n_embd", &c.n_embd},
                             {"n_layer", &c.n_layer},
                             {"n_head", &c.n_head},
                             {"layer_norm_epsilon", &c.layer_norm_epsilon},
                             {"initializer_range", &c.initializer_range}});
  c.validate();
  return c;
}

LlamaConfig LlamaConfig::from_name_or_file(const std::string& name_or_path) {
  if (name_or_path == "tiny") return tiny();
  if (name_or_path == "small") return small();
  ACC_CHECK(name_or_path.find('.') != std::string::npos || name_or_path.find('/') != std::string::npos,
            "LlamaConfig: unknown model '", name_or_path, "' (expected tiny, small or a YAML file)");
  LlamaConfig c = small();
  read_fields(name_or_path, "llama", {{"vocab_size", &c.vocab_size},
                             {"hidden_size", &c.hidden_size},
                             {"intermediate_size", &c.intermediate_size},
                             {"num_hidden_layers", &c.num_hidden_layers},
                             {"num_attention_heads", &c.num_attention_heads},
                             {"num_key_value_heads", &c.num_key_value_heads},
                             {"max_position_embeddings", &c.max_position_embeddings},
                             {"rms_norm_eps", &c.rms_norm_eps},
                             {"rope_theta", &c.rope_theta},
                             {"initializer_range", &c.initializer_range}});
  c.validate();
  return c;
}

}  // namespace acc::models
