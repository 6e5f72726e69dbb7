#pragma once
// 2-D convolution and pooling for small CNNs, f32, NCHW layout.
// Convolution is im2col + kernels::matmul. Backward writes dx and accumulates (+=) dw, db.
#include <cstdint>

namespace acc::kernels {

struct Conv2dShape {
  int64_t N = 0, C = 0, H = 0, W = 0;  // input
  int64_t K = 0;                       // output channels
  int64_t R = 0, S = 0;                // kernel height, width
  int64_t stride = 1, pad = 0;
  int64_t out_h() const { return (H + 2 * pad - R) / stride + 1; }
  int64_t out_w() const { return (W + 2 * pad - S) / stride + 1; }
};
// x [N,C,H,W], w [K,C,R,S], b [K] (may be null), y [N,K,OH,OW].
void conv2d_fwd(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s);
// dx may be null (first layer); db may be null.
void conv2d_bwd(const float* dy, const float* x, const float* w, float* dx, float* dw, float* db,
                const Conv2dShape& s);

struct Pool2dShape {
  int64_t N = 0, C = 0, H = 0, W = 0;
  int64_t kernel = 2, stride = 2;
  int64_t out_h() const { return (H - kernel) / stride + 1; }
  int64_t out_w() const { return (W - kernel) / stride + 1; }
};
// argmax [N,C,OH,OW] int32 (flat index within the H*W plane) is saved for backward.
void maxpool2d_fwd(const float* x, float* y, int32_t* argmax, const Pool2dShape& s);
// Writes dx (zero where no window took the maximum).
void maxpool2d_bwd(const float* dy, const int32_t* argmax, float* dx, const Pool2dShape& s);

namespace ref {
void conv2d_fwd(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s);
void conv2d_bwd(const float* dy, const float* x, const float* w, float* dx, float* dw, float* db,
                const Conv2dShape& s);
void maxpool2d_fwd(const float* x, float* y, int32_t* argmax, const Pool2dShape& s);
void maxpool2d_bwd(const float* dy, const int32_t* argmax, float* dx, const Pool2dShape& s);
}  // namespace ref

}  // namespace acc::kernels
