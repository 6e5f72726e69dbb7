#include "acc/models/layers.h"

#include "acc/nn/init.h"
#include "acc/ops/ops.h"

namespace acc::models {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, float init_std)
    : nn::Linear(in_features, out_features, bias), init_std_(init_std), bias_(bias) {}

void Linear::reset_parameters(uint64_t seed, const std::string& prefix) {
  nn::fill_normal(param("weight"), seed, prefix + "weight", 0.f, init_std_);
  if (bias_) Tensor(param("bias")).zero_();
}

Tensor Linear::forward(const Tensor& x) {
  const Tensor& w = param("weight");
  const Tensor bias = bias_ ? param("bias") : Tensor();
  return ops::linear(x, bf16_ ? ops::cast(w, DType::bf16) : w, bias);
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, float init_std)
    : nn::Embedding(num_embeddings, dim), init_std_(init_std) {}

void Embedding::reset_parameters(uint64_t seed, const std::string& prefix) {
  nn::fill_normal(param("weight"), seed, prefix + "weight", 0.f, init_std_);
}

Tensor project_to_vocab(const Tensor& x, const Tensor& table, bool bf16) {
  return ops::linear(x, bf16 ? ops::cast(table, DType::bf16) : table);
}

void set_bf16_compute(nn::Module& root, bool on) {
  root.apply([on](nn::Module& m) {
    if (auto* linear = dynamic_cast<Linear*>(&m)) linear->set_bf16(on);
  });
}

}  // namespace acc::models
