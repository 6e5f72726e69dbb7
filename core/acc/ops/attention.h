#pragma once
// Attention-side ops on [B, H, T, D] tensors (kernels::attention, kernels::rope).
#include <cstdint>

#include "acc/tensor/tensor.h"

namespace acc::ops {

// Causal self-attention; q [B,H,T,D], k and v [B,Hkv,T,D] with H % Hkv == 0 (grouped-query).
// scale 0 means 1/sqrt(D).
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale = 0.0);

// Rotary position embedding (Hugging Face Llama convention) at positions pos_offset + t.
Tensor rope(const Tensor& x, double theta = 10000.0, int64_t pos_offset = 0);

}  // namespace acc::ops
