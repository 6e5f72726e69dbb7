#pragma once
// Row-wise softmax over [rows, cols] f32 (numerically stable). Backward writes dx.
#include <cstdint>

namespace acc::kernels {

void softmax_fwd(const float* x, float* y, int64_t rows, int64_t cols);
void softmax_bwd(const float* dy, const float* y, float* dx, int64_t rows, int64_t cols);

namespace ref {
void softmax_fwd(const float* x, float* y, int64_t rows, int64_t cols);
void softmax_bwd(const float* dy, const float* y, float* dx, int64_t rows, int64_t cols);
}  // namespace ref

}  // namespace acc::kernels
