#pragma once
// Element-wise activations over n f32 values. Backward writes dx (it does not accumulate).
#include <cstdint>

namespace acc::kernels {

// GELU, tanh approximation (GPT-2's "gelu_new").
void gelu_fwd(const float* x, float* y, int64_t n);
void gelu_bwd(const float* dy, const float* x, float* dx, int64_t n);
// SiLU: y = x * sigmoid(x).
void silu_fwd(const float* x, float* y, int64_t n);
void silu_bwd(const float* dy, const float* x, float* dx, int64_t n);
// SwiGLU as in Llama's MLP: y = silu(gate) * up.
void swiglu_fwd(const float* gate, const float* up, float* y, int64_t n);
void swiglu_bwd(const float* dy, const float* gate, const float* up, float* dgate, float* dup,
                int64_t n);

namespace ref {
void gelu_fwd(const float* x, float* y, int64_t n);
void gelu_bwd(const float* dy, const float* x, float* dx, int64_t n);
void silu_fwd(const float* x, float* y, int64_t n);
void silu_bwd(const float* dy, const float* x, float* dx, int64_t n);
void swiglu_fwd(const float* gate, const float* up, float* y, int64_t n);
void swiglu_bwd(const float* dy, const float* gate, const float* up, float* dgate, float* dup,
                int64_t n);
}  // namespace ref

}  // namespace acc::kernels
