#pragma once
// Deferred initialisation (fsdp_cpu_ram_efficient_loading): a model built inside a
// DeferredInit scope gets parameters that have a shape but no memory. Each one records how it
// is initialised (the nn::fill_* calls of reset_parameters), and whoever gives it memory later
// produces the values: all of them (materialize), or a sharding strategy only the elements of
// its rank's shard (fill_part). Initialisation is keyed by (seed, name, element), so a shard
// made this way equals the same slice of a full initialisation, bit for bit, and no rank ever
// holds the whole model.
#include <cstdint>

#include "acc/nn/module.h"

namespace acc::nn {

class DeferredInit {
 public:
  explicit DeferredInit(bool enabled = true);
  ~DeferredInit();
  DeferredInit(const DeferredInit&) = delete;
  DeferredInit& operator=(const DeferredInit&) = delete;

 private:
  bool previous_;
};

// A parameter for a module to register (counted as parameters): zeros, or, inside a
// DeferredInit scope, without memory and recorded as zeros.
Tensor new_parameter(const Shape& shape);

// True for a parameter made inside DeferredInit that has no memory yet.
bool is_deferred(const Tensor& p);
bool has_deferred_parameters(const Module& root);

// The recorded initialisations (fill_* call these for a deferred parameter instead of writing).
void defer_constant(const Tensor& p, float value);
void defer_normal(const Tensor& p, uint64_t seed, const std::string& name, float mean, float std);
void defer_uniform(const Tensor& p, uint64_t seed, const std::string& name, float low, float high);

// Writes elements [first, first + count) of deferred parameter p (flat, row-major) to dst.
void fill_part(const Tensor& p, int64_t first, int64_t count, float* dst);
// Gives every deferred parameter of root its memory and its values.
void materialize(Module& root);

}  // namespace acc::nn
