#include "acc/nn/init.h"

#include "acc/autograd/grad_mode.h"
#include "acc/nn/deferred_init.h"

namespace acc::nn {

void init_parameters(Module& root, uint64_t seed) {
  autograd::NoGradGuard no_grad;
  for (auto& [name, module] : root.named_modules())
    module->reset_parameters(seed, name.empty() ? "" : name + ".");
}

void fill_uniform(const Tensor& p, uint64_t seed, const std::string& name, float low, float high) {
  if (is_deferred(p)) return defer_uniform(p, seed, name, low, high);
  Tensor values = Tensor::rand_uniform(p.shape(), seed, name, low, high);
  Tensor(p).copy_(values);
}

void fill_normal(const Tensor& p, uint64_t seed, const std::string& name, float mean, float std) {
  if (is_deferred(p)) return defer_normal(p, seed, name, mean, std);
  Tensor values = Tensor::randn(p.shape(), seed, name, mean, std);
  Tensor(p).copy_(values);
}

void fill_constant(const Tensor& p, float value) {
  if (is_deferred(p)) return defer_constant(p, value);
  Tensor(p).fill_(value);
}

}  // namespace acc::nn
