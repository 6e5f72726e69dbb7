#pragma once
// models::Structure: what a model says about its own layout, in one description any strategy
// may read. Models describe, strategies decide: FSDP turns the blocks into units and keeps the
// shared parameters gathered, its vocabulary-parallel head splits the token embedding, tensor
// parallelism splits the packed tensors and the groups below. Names are qualified names in the
// model ("transformer.h.0.attn.c_attn.weight").
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace acc::models {

// Every member has a default, so a model declares it with designated initializers naming only
// what it sets.
struct Structure {
  // Type names of the repeated blocks (Hugging Face's _no_split_modules): what
  // TRANSFORMER_BASED_WRAP wraps when the config names no class.
  std::vector<std::string> block_types{};
  // Parameters the model reads outside the call of the module that owns them (a head tied to
  // the token embedding): a sharding strategy keeps them gathered for the whole step.
  std::vector<std::string> shared_parameters{};
  // The module that looks token ids up, whose "weight" is [V, C] (with a tied head, the head's
  // weight); empty: none. Naming it lets FSDP split the embedding and the head over the
  // vocabulary instead of gathering them (fsdp_vocab_parallel).
  std::string token_embedding{};
  // The chain a causal LM's hidden states run through (CausalLM::embed, layers(), final_norm
  // and the head), as a pipeline strategy cuts it into stages: the modules embed() calls, the
  // layers in order, and the modules the end of the chain reads (the final norm and the owner
  // of the head's weight: with a tied head, the token embedding again, so two stages hold it).
  struct Chain {
    std::vector<std::string> embedding{}, layers{}, head{};
    // The residual branches every layer is made of, in order: each the layer's submodules (by
    // name within the layer) it runs one after another, the layer computing x + branch(x) for
    // each in turn (GPT-2: {ln_1, attn}, {ln_2, mlp}). A pipeline may cut a layer between its
    // branches. Empty: layers are cut whole.
    std::vector<std::vector<std::string>> branches{};
  };
  Chain chain{};

  // Parameters that pack several tensors side by side along their first dimension, with how
  // many (GPT-2's c_attn: q, k and v): a strategy that splits that dimension splits each.
  std::map<std::string, int> packed{};

  // Parameters a strategy that splits them over ranks (tensor parallelism) must split together
  // for the model to compute what it computes whole: an attention's q, k and v by rows with
  // its output projection by columns, in whole heads; an MLP's first projections by rows with
  // its second by columns.
  struct SplitTogether {
    std::string module;  // the attention or MLP, for messages
    struct Member {
      std::string parameter;
      int dim = 0;            // the dimension split
      int64_t heads = 0;      // the whole heads it holds along dim (per packed tensor); 0: rows
    };
    std::vector<Member> members;
  };
  std::vector<SplitTogether> split_together{};

  // How many tensors `parameter` packs: 1 unless listed in `packed`.
  int packed_sections(const std::string& parameter) const {
    const auto it = packed.find(parameter);
    return it == packed.end() ? 1 : it->second;
  }
};

}  // namespace acc::models
