#include "acc/nn/init.h"

#include "acc/autograd/grad_mode.h"

namespace acc::nn {

void init_parameters(Module& root, uint64_t seed) {
  autograd::NoGradGuard no_grad;
  for (auto& [name, module] : root.named_modules())
    module->reset_parameters(seed, name.empty() ? "" : name + ".");
}

void fill_uniform(const Tensor& p, uint64_t seed, const std::string& name, float low, float high) {
  Tensor values = Tensor::rand_uniform(p.shape(), seed, name, low, high);
  Tensor(p).copy_(values);
}

void fill_normal(const Tensor& p, uint64_t seed, const std::string& name, float mean, float std) {
  Tensor values = Tensor::randn(p.shape(), seed, name, mean, std);
  Tensor(p).copy_(values);
}

}  // namespace acc::nn
