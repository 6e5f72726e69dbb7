#include "acc/ops/norm.h"

#include "acc/autograd/function.h"
#include "acc/kernels/norms.h"
#include "acc/ops/detail.h"
#include "acc/util/profiler.h"

namespace acc::ops {

namespace {

struct Rows {
  int64_t rows = 0, cols = 0;
};

Rows check_norm_args(const char* op, const Tensor& x, const Tensor& gamma, const Tensor& beta) {
  detail::check_defined(x, op, "x");
  ACC_CHECK(x.dim() >= 1, op, ": x needs at least one dimension, got ", x.describe());
  const int64_t cols = x.size(-1);
  for (const Tensor* p : {&gamma, &beta})
    ACC_CHECK(!p->defined() || p->shape() == Shape{cols}, op, ": parameter ", p->describe(),
              " does not match the last dimension of x ", x.describe(), " (expected [", cols, "])");
  return {cols ? x.numel() / cols : 0, cols};
}

const float* ptr_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

// A zeroed [cols] buffer for a parameter gradient the kernel accumulates into, when needed.
Tensor param_grad(bool needed, int64_t cols) {
  if (!needed) return Tensor();
  Tensor t = detail::new_output({cols});
  t.zero_();
  return t;
}

float* mutable_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

}  // namespace

Tensor layer_norm(const Tensor& x_in, const Tensor& gamma_in, const Tensor& beta_in, double eps) {
  ACC_PROFILE("layer_norm");
  const Rows r = check_norm_args("layer_norm", x_in, gamma_in, beta_in);
  Tensor x = detail::as_f32(x_in, "layer_norm").detach();
  Tensor gamma = gamma_in.defined() ? detail::as_f32(gamma_in, "layer_norm").detach() : Tensor();
  Tensor beta = beta_in.defined() ? detail::as_f32(beta_in, "layer_norm") : Tensor();
  Tensor out = detail::new_output(x.shape());
  Tensor mean = detail::new_output({r.rows}), rstd = detail::new_output({r.rows});
  kernels::layernorm_fwd(x.data<float>(), ptr_or_null(gamma), ptr_or_null(beta), out.data<float>(),
                         mean.data<float>(), rstd.data<float>(), r.rows, r.cols,
                         static_cast<float>(eps));
  const bool need_g = gamma_in.requires_grad(), need_b = beta_in.requires_grad();
  autograd::record("layer_norm", out, {x_in, gamma_in, beta_in}, [=](const Tensor& g) {
    ACC_PROFILE("layer_norm.backward");
    Tensor dx = detail::new_output(x.shape());
    Tensor dgamma = param_grad(need_g, r.cols), dbeta = param_grad(need_b, r.cols);
    kernels::layernorm_bwd(g.data<float>(), x.data<float>(), ptr_or_null(gamma), mean.data<float>(),
                           rstd.data<float>(), dx.data<float>(), mutable_or_null(dgamma),
                           mutable_or_null(dbeta), r.rows, r.cols);
    return std::vector<Tensor>{dx, dgamma, dbeta};
  });
  return out;
}

Tensor rms_norm(const Tensor& x_in, const Tensor& gamma_in, double eps) {
  ACC_PROFILE("rms_norm");
  const Rows r = check_norm_args("rms_norm", x_in, gamma_in, Tensor());
  Tensor x = detail::as_f32(x_in, "rms_norm").detach();
  Tensor gamma = gamma_in.defined() ? detail::as_f32(gamma_in, "rms_norm").detach() : Tensor();
  Tensor out = detail::new_output(x.shape());
  Tensor rstd = detail::new_output({r.rows});
  kernels::rmsnorm_fwd(x.data<float>(), ptr_or_null(gamma), out.data<float>(), rstd.data<float>(),
                       r.rows, r.cols, static_cast<float>(eps));
  const bool need_g = gamma_in.requires_grad();
  autograd::record("rms_norm", out, {x_in, gamma_in}, [=](const Tensor& g) {
    ACC_PROFILE("rms_norm.backward");
    Tensor dx = detail::new_output(x.shape());
    Tensor dgamma = param_grad(need_g, r.cols);
    kernels::rmsnorm_bwd(g.data<float>(), x.data<float>(), ptr_or_null(gamma), rstd.data<float>(),
                         dx.data<float>(), mutable_or_null(dgamma), r.rows, r.cols);
    return std::vector<Tensor>{dx, dgamma};
  });
  return out;
}

}  // namespace acc::ops
