#include "acc/ops/conv.h"

#include "acc/autograd/function.h"
#include "acc/kernels/conv.h"
#include "acc/ops/detail.h"
#include "acc/util/profiler.h"

namespace acc::ops {

namespace {

Tensor zeroed(const Shape& shape) {
  Tensor t = detail::new_output(shape);
  t.zero_();
  return t;
}

}  // namespace

Tensor conv2d(const Tensor& x_in, const Tensor& w_in, const Tensor& bias_in, int64_t stride,
              int64_t pad) {
  ACC_PROFILE("conv2d");
  detail::check_defined(x_in, "conv2d", "x");
  detail::check_defined(w_in, "conv2d", "weight");
  ACC_CHECK(x_in.dim() == 4 && w_in.dim() == 4 && x_in.size(1) == w_in.size(1),
            "conv2d: expected x [N,C,H,W] and weight [K,C,R,S] with the same C, got x ",
            x_in.describe(), " and weight ", w_in.describe());
  ACC_CHECK(!bias_in.defined() || bias_in.shape() == Shape{w_in.size(0)}, "conv2d: bias ",
            bias_in.describe(), " does not match weight ", w_in.describe());
  const kernels::Conv2dShape s{.N = x_in.size(0), .C = x_in.size(1), .H = x_in.size(2),
                               .W = x_in.size(3), .K = w_in.size(0), .R = w_in.size(2),
                               .S = w_in.size(3), .stride = stride, .pad = pad};
  ACC_CHECK(stride >= 1 && pad >= 0 && s.out_h() >= 1 && s.out_w() >= 1, "conv2d: stride ", stride,
            " and padding ", pad, " leave no output for x ", x_in.describe(), " and weight ",
            w_in.describe());
  Tensor x = detail::as_f32(x_in, "conv2d").detach();
  Tensor w = detail::as_f32(w_in, "conv2d").detach();
  Tensor b = bias_in.defined() ? detail::as_f32(bias_in, "conv2d") : Tensor();
  Tensor out = detail::new_output({s.N, s.K, s.out_h(), s.out_w()});
  kernels::conv2d_fwd(x.data<float>(), w.data<float>(), b.defined() ? b.data<float>() : nullptr,
                      out.data<float>(), s);
  const bool need_x = x_in.requires_grad(), need_w = w_in.requires_grad();
  const bool need_b = bias_in.defined() && bias_in.requires_grad();
  autograd::record("conv2d", out, {x_in, w_in, bias_in}, [=](const Tensor& g) {
    ACC_PROFILE("conv2d.backward");
    Tensor dx = need_x ? detail::new_output(x.shape()) : Tensor();
    Tensor dw = zeroed(w.shape());  // the kernel always accumulates dw
    Tensor db = need_b ? zeroed({s.K}) : Tensor();
    kernels::conv2d_bwd(g.data<float>(), x.data<float>(), w.data<float>(),
                        need_x ? dx.data<float>() : nullptr, dw.data<float>(),
                        need_b ? db.data<float>() : nullptr, s);
    return std::vector<Tensor>{dx, need_w ? dw : Tensor(), db};
  });
  return out;
}

Tensor max_pool2d(const Tensor& x_in, int64_t kernel, int64_t stride) {
  ACC_PROFILE("max_pool2d");
  detail::check_defined(x_in, "max_pool2d", "x");
  ACC_CHECK(x_in.dim() == 4, "max_pool2d: expected x [N,C,H,W], got ", x_in.describe());
  const kernels::Pool2dShape s{.N = x_in.size(0), .C = x_in.size(1), .H = x_in.size(2),
                               .W = x_in.size(3), .kernel = kernel, .stride = stride};
  ACC_CHECK(kernel >= 1 && stride >= 1 && s.H >= kernel && s.W >= kernel, "max_pool2d: window ",
            kernel, " with stride ", stride, " does not fit x ", x_in.describe());
  Tensor x = detail::as_f32(x_in, "max_pool2d");
  const Shape out_shape{s.N, s.C, s.out_h(), s.out_w()};
  Tensor out = detail::new_output(out_shape);
  Tensor argmax = detail::new_output(out_shape, DType::i32);
  kernels::maxpool2d_fwd(x.data<float>(), out.data<float>(), argmax.data<int32_t>(), s);
  autograd::record("max_pool2d", out, {x_in}, [argmax, s, in_shape = x.shape()](const Tensor& g) {
    ACC_PROFILE("max_pool2d.backward");
    Tensor dx = detail::new_output(in_shape);
    kernels::maxpool2d_bwd(g.data<float>(), argmax.data<int32_t>(), dx.data<float>(), s);
    return std::vector<Tensor>{dx};
  });
  return out;
}

}  // namespace acc::ops
