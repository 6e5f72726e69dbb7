#pragma once
// Optimizer updates over flat f32 buffers of n elements, in one pass each. When param_bf16 is
// not null the updated parameters are also written there as bf16 (the compute-dtype copy), in
// the same pass.
#include <cstdint>

#include "acc/tensor/dtype.h"

namespace acc::kernels {

struct AdamWParams {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.f;
  int64_t step = 1;  // 1-based, for bias correction
};
// Decoupled weight decay: p -= lr*wd*p; then m,v updated and p -= lr * mhat / (sqrt(vhat)+eps).
void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n,
                const AdamWParams& h, bfloat16* param_bf16 = nullptr);

struct SGDParams {
  float lr = 1e-2f, momentum = 0.f, dampening = 0.f, weight_decay = 0.f;
  bool nesterov = false;
  bool first_step = false;  // momentum buffer is initialised to the gradient on the first step
};
// PyTorch SGD semantics; momentum_buf may be null when momentum == 0.
void sgd_step(float* param, const float* grad, float* momentum_buf, int64_t n, const SGDParams& h,
              bfloat16* param_bf16 = nullptr);

namespace ref {
void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n,
                const AdamWParams& h, bfloat16* param_bf16 = nullptr);
void sgd_step(float* param, const float* grad, float* momentum_buf, int64_t n, const SGDParams& h,
              bfloat16* param_bf16 = nullptr);
}  // namespace ref

}  // namespace acc::kernels
