#pragma once
// The layers the models are built from: nn::Linear / nn::Embedding with the transformer init
// (normal, std given per layer, as GPT-2 and Llama do) and, for Linear, an optional bf16 compute
// path. Type names stay "Linear" / "Embedding", so wrap policies see ordinary layers.
// Construction keeps the base classes' values; this init applies from nn::init_parameters,
// which every model's constructor calls once (filling 124M values twice would cost seconds).
#include <cstdint>

#include "acc/nn/layers.h"

namespace acc::models {

// y = x W^T + b with W [out, in]. The product runs in W's dtype: f32, or bf16 when a strategy
// with mixed precision has put bf16 views of its gathered parameters in place.
class Linear : public nn::Linear {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, float init_std);
  // N(0, init_std) weight, zero bias, keyed by (seed, qualified name, element index).
  void reset_parameters(uint64_t seed, const std::string& prefix) override;

 private:
  float init_std_;
  bool bias_;
};

// Token / position table with N(0, init_std) init.
class Embedding : public nn::Embedding {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, float init_std);
  void reset_parameters(uint64_t seed, const std::string& prefix) override;

 private:
  float init_std_;
};

// [B, T, H*D] <-> [B, H, T, D], the attention kernel's layout. The number of heads H comes
// from the width and the head size D, so a projection that holds only some heads (tensor
// parallelism splits them over ranks) needs no other change.
Tensor split_heads(const Tensor& x, int64_t head_dim);
Tensor merge_heads(const Tensor& x);

}  // namespace acc::models
