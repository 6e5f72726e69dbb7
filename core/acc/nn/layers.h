#pragma once
// The basic modules. Parameters are f32, allocated under memory::Category::parameters and
// initialised at construction with seed 0 and local names; nn::init_parameters(model, seed)
// re-initialises them keyed by their fully qualified names.
#include <cstdint>
#include <memory>

#include "acc/nn/module.h"

namespace acc::nn {

// y = x W^T + b; weight [out, in], bias [out]; uniform(+-1/sqrt(in)) like PyTorch.
class Linear : public Module {
 public:
  static constexpr const char* kTypeName = "Linear";  // type_name(), what policies match
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  void reset_parameters(uint64_t seed, const std::string& prefix) override;
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  int64_t in_, out_;
  bool bias_;
};

// Lookup of integer ids [...] in weight [num, dim]; N(0, 1) init.
class Embedding : public Module {
 public:
  static constexpr const char* kTypeName = "Embedding";  // type_name(), what policies match
  Embedding(int64_t num_embeddings, int64_t dim);
  Tensor forward(const Tensor& ids) override;
  void reset_parameters(uint64_t seed, const std::string& prefix) override;
};

// Over the last dimension; weight ones, bias zeros.
class LayerNorm : public Module {
 public:
  static constexpr const char* kTypeName = "LayerNorm";  // type_name(), what policies match
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  Tensor forward(const Tensor& x) override;
  void reset_parameters(uint64_t seed, const std::string& prefix) override;
  double eps() const { return eps_; }

 private:
  double eps_;
};

class RMSNorm : public Module {
 public:
  static constexpr const char* kTypeName = "RMSNorm";  // type_name(), what policies match
  explicit RMSNorm(int64_t dim, double eps = 1e-6);
  Tensor forward(const Tensor& x) override;
  void reset_parameters(uint64_t seed, const std::string& prefix) override;
  double eps() const { return eps_; }

 private:
  double eps_;
};

// Identity in eval mode; in training the mask is keyed by (seed, step): call set_step once per
// training step (a recomputation in the same step then reproduces the mask). Give each Dropout
// in a model its own seed so layers do not share masks.
class Dropout : public Module {
 public:
  explicit Dropout(double p, uint64_t seed = 0);
  Tensor forward(const Tensor& x) override;
  void set_step(uint64_t step) { step_ = step; }
  double p() const { return p_; }

 private:
  double p_;
  uint64_t seed_, step_ = 0;
};

class GELU : public Module {
 public:
  GELU() : Module("GELU") {}
  Tensor forward(const Tensor& x) override;
};

class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x) override;
};

// [N, ...] -> [N, prod(...)].
class Flatten : public Module {
 public:
  Flatten() : Module("Flatten") {}
  Tensor forward(const Tensor& x) override;
};

// Linear(in, hidden) - GELU - Linear(hidden, out), children "fc1", "act", "fc2".
class MLP : public Module {
 public:
  MLP(int64_t in_features, int64_t hidden, int64_t out_features);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<Linear> fc1_, fc2_;
  std::shared_ptr<GELU> act_;
};

// NCHW convolution with a square kernel; weight [out, in, k, k], uniform(+-1/sqrt(in*k*k)).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1,
         int64_t pad = 0, bool bias = true);
  Tensor forward(const Tensor& x) override;
  void reset_parameters(uint64_t seed, const std::string& prefix) override;

 private:
  int64_t stride_, pad_;
  bool bias_;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel = 2, int64_t stride = 0);  // stride 0 means = kernel
  Tensor forward(const Tensor& x) override;

 private:
  int64_t kernel_, stride_;
};

}  // namespace acc::nn
