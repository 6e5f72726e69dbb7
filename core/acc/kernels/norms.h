#pragma once
// Layer norm and RMS norm over the last dimension of a [rows, cols] f32 matrix.
// Forward saves per-row statistics that backward reuses. Backward *accumulates* (+=) into the
// parameter gradients dgamma/dbeta (which may be null to skip them) and *writes* dx.
#include <cstdint>

namespace acc::kernels {

// y = (x - mean) * rstd * gamma + beta; mean/rstd are [rows]. gamma/beta may be null (1 / 0).
void layernorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                   float* rstd, int64_t rows, int64_t cols, float eps);
void layernorm_bwd(const float* dy, const float* x, const float* gamma, const float* mean,
                   const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                   int64_t cols);

// y = x * rstd * gamma, rstd = 1/sqrt(mean(x^2) + eps); rstd is [rows].
void rmsnorm_fwd(const float* x, const float* gamma, float* y, float* rstd, int64_t rows,
                 int64_t cols, float eps);
void rmsnorm_bwd(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx,
                 float* dgamma, int64_t rows, int64_t cols);

namespace ref {
void layernorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                   float* rstd, int64_t rows, int64_t cols, float eps);
void layernorm_bwd(const float* dy, const float* x, const float* gamma, const float* mean,
                   const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                   int64_t cols);
void rmsnorm_fwd(const float* x, const float* gamma, float* y, float* rstd, int64_t rows,
                 int64_t cols, float eps);
void rmsnorm_bwd(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx,
                 float* dgamma, int64_t rows, int64_t cols);
}  // namespace ref

}  // namespace acc::kernels
