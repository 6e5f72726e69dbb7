#pragma once
// Deterministic parameter initialisation keyed by (seed, fully qualified parameter name,
// element index): the same (seed, name) gives the same values wherever the module lives and
// however the parameter is later sharded.
#include <cstdint>
#include <string>

#include "acc/nn/module.h"

namespace acc::nn {

// Calls every module's reset_parameters(seed, "<qualified module name>.").
void init_parameters(Module& root, uint64_t seed);

// Overwrite an existing parameter in place (it may be a view into a flat buffer), f32 or bf16.
void fill_uniform(const Tensor& p, uint64_t seed, const std::string& name, float low, float high);
void fill_normal(const Tensor& p, uint64_t seed, const std::string& name, float mean, float std);
void fill_constant(const Tensor& p, float value);
// A parameter made inside nn::DeferredInit has no memory: these record what they would write
// (see deferred_init.h).

}  // namespace acc::nn
