#include "acc/nn/layers.h"

#include <cmath>

#include "acc/nn/deferred_init.h"
#include "acc/nn/init.h"
#include "acc/ops/ops.h"

namespace acc::nn {

namespace {

float inv_sqrt(int64_t fan_in) { return fan_in > 0 ? 1.f / std::sqrt(static_cast<float>(fan_in)) : 0.f; }

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : Module(kTypeName), in_(in_features), out_(out_features), bias_(bias) {
  ACC_CHECK(in_features > 0 && out_features > 0, "Linear: features must be positive, got in ",
            in_features, ", out ", out_features);
  register_parameter("weight", new_parameter({out_features, in_features}));
  if (bias) register_parameter("bias", new_parameter({out_features}));
  reset_parameters(0, "");
}

void Linear::reset_parameters(uint64_t seed, const std::string& prefix) {
  const float bound = inv_sqrt(in_);
  fill_uniform(param("weight"), seed, prefix + "weight", -bound, bound);
  if (bias_) fill_uniform(param("bias"), seed, prefix + "bias", -bound, bound);
}

Tensor Linear::forward(const Tensor& x) {
  return ops::linear(x, param("weight"), bias_ ? param("bias") : Tensor());
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim) : Module(kTypeName) {
  register_parameter("weight", new_parameter({num_embeddings, dim}));
  reset_parameters(0, "");
}

void Embedding::reset_parameters(uint64_t seed, const std::string& prefix) {
  fill_normal(param("weight"), seed, prefix + "weight", 0.f, 1.f);
}

Tensor Embedding::forward(const Tensor& ids) { return ops::embedding(param("weight"), ids); }

LayerNorm::LayerNorm(int64_t dim, double eps) : Module(kTypeName), eps_(eps) {
  register_parameter("weight", new_parameter({dim}));
  register_parameter("bias", new_parameter({dim}));
  reset_parameters(0, "");
}

void LayerNorm::reset_parameters(uint64_t, const std::string&) {
  fill_constant(param("weight"), 1.f);
  fill_constant(param("bias"), 0.f);
}

Tensor LayerNorm::forward(const Tensor& x) {
  return ops::layer_norm(x, param("weight"), param("bias"), eps_);
}

RMSNorm::RMSNorm(int64_t dim, double eps) : Module(kTypeName), eps_(eps) {
  register_parameter("weight", new_parameter({dim}));
  reset_parameters(0, "");
}

void RMSNorm::reset_parameters(uint64_t, const std::string&) { fill_constant(param("weight"), 1.f); }

Tensor RMSNorm::forward(const Tensor& x) { return ops::rms_norm(x, param("weight"), eps_); }

Dropout::Dropout(double p, uint64_t seed) : Module("Dropout"), p_(p), seed_(seed) {
  ACC_CHECK(p >= 0.0 && p < 1.0, "Dropout: probability ", p, " must be in [0, 1)");
}

Tensor Dropout::forward(const Tensor& x) {
  return is_training() && p_ > 0.0 ? ops::dropout(x, p_, seed_, step_) : x;
}

Tensor GELU::forward(const Tensor& x) { return ops::gelu(x); }
Tensor SiLU::forward(const Tensor& x) { return ops::silu(x); }

Tensor Flatten::forward(const Tensor& x) {
  ACC_CHECK(x.dim() >= 1, "Flatten: needs at least one dimension, got ", x.describe());
  return ops::reshape(x, {x.size(0), -1});
}

MLP::MLP(int64_t in_features, int64_t hidden, int64_t out_features) : Module("MLP") {
  fc1_ = register_module("fc1", std::make_shared<Linear>(in_features, hidden));
  act_ = register_module("act", std::make_shared<GELU>());
  fc2_ = register_module("fc2", std::make_shared<Linear>(hidden, out_features));
}

Tensor MLP::forward(const Tensor& x) { return (*fc2_)((*act_)((*fc1_)(x))); }

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride,
               int64_t pad, bool bias)
    : Module("Conv2d"), stride_(stride), pad_(pad), bias_(bias) {
  register_parameter("weight", new_parameter({out_channels, in_channels, kernel, kernel}));
  if (bias) register_parameter("bias", new_parameter({out_channels}));
  reset_parameters(0, "");
}

void Conv2d::reset_parameters(uint64_t seed, const std::string& prefix) {
  const Tensor& w = param("weight");
  const float bound = inv_sqrt(w.size(1) * w.size(2) * w.size(3));
  fill_uniform(w, seed, prefix + "weight", -bound, bound);
  if (bias_) fill_uniform(param("bias"), seed, prefix + "bias", -bound, bound);
}

Tensor Conv2d::forward(const Tensor& x) {
  return ops::conv2d(x, param("weight"), bias_ ? param("bias") : Tensor(), stride_, pad_);
}

MaxPool2d::MaxPool2d(int64_t kernel, int64_t stride)
    : Module("MaxPool2d"), kernel_(kernel), stride_(stride ? stride : kernel) {}

Tensor MaxPool2d::forward(const Tensor& x) { return ops::max_pool2d(x, kernel_, stride_); }

}  // namespace acc::nn
