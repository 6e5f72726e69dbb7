#pragma once
// Convolution and pooling for small CNNs (kernels::conv), NCHW f32.
#include <cstdint>

#include "acc/tensor/tensor.h"

namespace acc::ops {

// x [N,C,H,W], w [K,C,R,S], bias [K] (may be undefined) -> [N,K,OH,OW].
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, int64_t stride = 1,
              int64_t pad = 0);
// Max over kernel x kernel windows; x [N,C,H,W] -> [N,C,OH,OW].
Tensor max_pool2d(const Tensor& x, int64_t kernel = 2, int64_t stride = 2);

}  // namespace acc::ops
