#pragma once
// The layers the models are built from: nn::Linear / nn::Embedding with the transformer init
// (normal, std given per layer, as GPT-2 and Llama do) and, for Linear, an optional bf16 compute
// path. Type names stay "Linear" / "Embedding", so wrap policies see ordinary layers.
// Construction keeps the base classes' values; this init applies from nn::init_parameters,
// which every model's constructor calls once (filling 124M values twice would cost seconds).
#include <cstdint>

#include "acc/nn/layers.h"

namespace acc::models {

// y = x W^T + b with W [out, in] f32 (the master copy). With bf16 compute on, the product runs
// on a bf16 copy of W made in each forward (ops::cast passes the gradient back to W unchanged,
// in f32), so the optimizer always updates f32 weights.
class Linear : public nn::Linear {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, float init_std);
  Tensor forward(const Tensor& x) override;
  // N(0, init_std) weight, zero bias, keyed by (seed, qualified name, element index).
  void reset_parameters(uint64_t seed, const std::string& prefix) override;
  void set_bf16(bool on) { bf16_ = on; }
  bool bf16() const { return bf16_; }

 private:
  float init_std_;
  bool bias_;
  bool bf16_ = false;
};

// Token / position table with N(0, init_std) init.
class Embedding : public nn::Embedding {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, float init_std);
  void reset_parameters(uint64_t seed, const std::string& prefix) override;

 private:
  float init_std_;
};

// x W^T with a table W [V, C] (a tied output head), in bf16 when asked.
Tensor project_to_vocab(const Tensor& x, const Tensor& table, bool bf16);

// Switches every models::Linear under root to bf16 compute (or back to f32).
void set_bf16_compute(nn::Module& root, bool on);

}  // namespace acc::models
