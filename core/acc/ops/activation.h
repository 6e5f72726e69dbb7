#pragma once
// Activations (kernels::activations, kernels::softmax) and dropout.
#include <cstdint>

#include "acc/tensor/tensor.h"

namespace acc::ops {

Tensor gelu(const Tensor& x);  // tanh approximation (GPT-2)
Tensor silu(const Tensor& x);
Tensor swiglu(const Tensor& gate, const Tensor& up);  // silu(gate) * up, same shapes
Tensor softmax(const Tensor& x);                      // over the last dimension

// Zeroes each element with probability p and scales the rest by 1/(1-p). The mask is a pure
// function of (seed, step, element index), so a recomputation (checkpointing) and every rank
// see the same mask, and the backward regenerates it instead of saving it.
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t step);

}  // namespace acc::ops
