#include "acc/ops/activation.h"

#include "acc/autograd/function.h"
#include "acc/kernels/activations.h"
#include "acc/kernels/softmax.h"
#include "acc/ops/detail.h"
#include "acc/tensor/random.h"
#include "acc/util/profiler.h"

namespace acc::ops {

namespace {

using KernelFwd = void (*)(const float*, float*, int64_t);
using KernelBwd = void (*)(const float*, const float*, float*, int64_t);

// y = f(x) element-wise; backward needs x.
Tensor unary(const char* op, const Tensor& x_in, KernelFwd fwd, KernelBwd bwd) {
  ACC_PROFILE(op);
  Tensor x = detail::as_f32(x_in, op).detach();
  Tensor out = detail::new_output(x.shape());
  fwd(x.data<float>(), out.data<float>(), x.numel());
  autograd::record(op, out, {x_in}, [x, bwd](const Tensor& g) {
    Tensor dx = detail::new_output(x.shape());
    bwd(g.data<float>(), x.data<float>(), dx.data<float>(), x.numel());
    return std::vector<Tensor>{dx};
  });
  return out;
}

}  // namespace

Tensor gelu(const Tensor& x) { return unary("gelu", x, kernels::gelu_fwd, kernels::gelu_bwd); }
Tensor silu(const Tensor& x) { return unary("silu", x, kernels::silu_fwd, kernels::silu_bwd); }

Tensor swiglu(const Tensor& gate_in, const Tensor& up_in) {
  ACC_PROFILE("swiglu");
  detail::check_defined(gate_in, "swiglu", "gate");
  detail::check_defined(up_in, "swiglu", "up");
  ACC_CHECK(gate_in.shape() == up_in.shape(), "swiglu: gate ", gate_in.describe(), " and up ",
            up_in.describe(), " must have the same shape");
  Tensor gate = detail::as_f32(gate_in, "swiglu").detach();
  Tensor up = detail::as_f32(up_in, "swiglu").detach();
  Tensor out = detail::new_output(gate.shape());
  kernels::swiglu_fwd(gate.data<float>(), up.data<float>(), out.data<float>(), gate.numel());
  autograd::record("swiglu", out, {gate_in, up_in}, [gate, up](const Tensor& g) {
    ACC_PROFILE("swiglu.backward");
    Tensor dgate = detail::new_output(gate.shape()), dup = detail::new_output(up.shape());
    kernels::swiglu_bwd(g.data<float>(), gate.data<float>(), up.data<float>(), dgate.data<float>(),
                        dup.data<float>(), gate.numel());
    return std::vector<Tensor>{dgate, dup};
  });
  return out;
}

Tensor softmax(const Tensor& x_in) {
  ACC_PROFILE("softmax");
  Tensor x = detail::as_f32(x_in, "softmax");
  ACC_CHECK(x.dim() >= 1, "softmax: needs at least one dimension, got ", x.describe());
  const int64_t cols = x.size(-1), rows = cols ? x.numel() / cols : 0;
  Tensor out = detail::new_output(x.shape());
  kernels::softmax_fwd(x.data<float>(), out.data<float>(), rows, cols);
  // Backward needs the output: save a detached handle (the output itself owns this node).
  autograd::record("softmax", out, {x_in}, [y = out.detach(), rows, cols](const Tensor& g) {
    ACC_PROFILE("softmax.backward");
    Tensor dx = detail::new_output(y.shape());
    kernels::softmax_bwd(g.data<float>(), y.data<float>(), dx.data<float>(), rows, cols);
    return std::vector<Tensor>{dx};
  });
  return out;
}

namespace {

// out[i] = in[i] * (kept(i) ? 1/(1-p) : 0) with the mask of (key).
void apply_dropout_mask(const float* in, float* out, int64_t n, uint64_t key, float p) {
  const float keep_scale = 1.f / (1.f - p);
  detail::parallel_range(n, detail::kGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i)
      out[i] = random::uniform(key, static_cast<uint64_t>(i)) >= p ? in[i] * keep_scale : 0.f;
  });
}

}  // namespace

Tensor dropout(const Tensor& x_in, double p, uint64_t seed, uint64_t step) {
  ACC_CHECK(p >= 0.0 && p < 1.0, "dropout: probability ", p, " must be in [0, 1)");
  Tensor x = detail::as_f32(x_in, "dropout");
  const uint64_t key = random::bits(random::stream_key(seed, "dropout"), step);
  const float pf = static_cast<float>(p);
  Tensor out = detail::new_output(x.shape());
  apply_dropout_mask(x.data<float>(), out.data<float>(), x.numel(), key, pf);
  autograd::record("dropout", out, {x_in}, [key, pf](const Tensor& g) {
    Tensor dx = detail::new_output(g.shape());
    apply_dropout_mask(g.data<float>(), dx.data<float>(), g.numel(), key, pf);
    return std::vector<Tensor>{dx};
  });
  return out;
}

}  // namespace acc::ops
