#include "acc/models/layers.h"

#include "acc/nn/init.h"
#include "acc/ops/ops.h"

namespace acc::models {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, float init_std)
    : nn::Linear(in_features, out_features, bias), init_std_(init_std), bias_(bias) {}

void Linear::reset_parameters(uint64_t seed, const std::string& prefix) {
  nn::fill_normal(param("weight"), seed, prefix + "weight", 0.f, init_std_);
  if (bias_) nn::fill_constant(param("bias"), 0.f);
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, float init_std)
    : nn::Embedding(num_embeddings, dim), init_std_(init_std) {}

void Embedding::reset_parameters(uint64_t seed, const std::string& prefix) {
  nn::fill_normal(param("weight"), seed, prefix + "weight", 0.f, init_std_);
}

Tensor split_heads(const Tensor& x, int64_t head_dim) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  ACC_CHECK(C % head_dim == 0, "split_heads: width ", C, " is not a whole number of heads of ", head_dim);
  return ops::permute(ops::reshape(x, {B, T, C / head_dim, head_dim}), {0, 2, 1, 3});
}

Tensor merge_heads(const Tensor& x) {
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), D = x.size(3);
  return ops::reshape(ops::permute(x, {0, 2, 1, 3}), {B, T, H * D});
}

}  // namespace acc::models
