#include "acc/ops/matmul.h"

#include <memory>
#include <utility>

#include "acc/autograd/function.h"
#include "acc/kernels/matmul.h"
#include "acc/ops/detail.h"
#include "acc/util/profiler.h"

namespace acc::ops {

namespace {

// op(X) * op(Y) for 2-D or batched 3-D operands of one dtype; f32 result.
Tensor product(const Tensor& X, const Tensor& Y, bool tx, bool ty, const char* op) {
  const bool batched = X.dim() == 3;
  ACC_CHECK((X.dim() == 2 || batched) && Y.dim() == X.dim() && (!batched || X.size(0) == Y.size(0)),
            op, ": expected two 2-D matrices or two 3-D batches of the same size, got ",
            X.describe(), " and ", Y.describe());
  kernels::MatmulShape s;
  s.trans_a = tx;
  s.trans_b = ty;
  s.M = tx ? X.size(-1) : X.size(-2);
  s.K = tx ? X.size(-2) : X.size(-1);
  const int64_t k2 = ty ? Y.size(-1) : Y.size(-2);
  s.N = ty ? Y.size(-2) : Y.size(-1);
  ACC_CHECK(s.K == k2, op, ": inner dimensions differ: ", X.describe(), (tx ? "^T" : ""), " * ",
            Y.describe(), (ty ? "^T" : ""), " (", s.K, " vs ", k2, ")");
  s.ab_type = X.dtype();
  Shape out_shape = batched ? Shape{X.size(0), s.M, s.N} : Shape{s.M, s.N};
  Tensor out = detail::new_output(out_shape);
  if (batched)
    kernels::batched_matmul(X.size(0), X.raw_data(), s.M * s.K, Y.raw_data(), s.K * s.N,
                            out.raw_data(), s.M * s.N, s);
  else
    kernels::matmul(X.raw_data(), Y.raw_data(), out.raw_data(), s);
  return out;
}

// Gradients of C = op(A) op(B) for both operands (stored layouts), given dC in A's dtype.
std::vector<Tensor> product_grads(const Tensor& A, const Tensor& B, bool ta, bool tb,
                                  const Tensor& dC, bool need_a, bool need_b) {
  const char* op = "matmul backward";
  Tensor dA, dB;
  if (!ta && !tb) {
    if (need_a) dA = product(dC, B, false, true, op);
    if (need_b) dB = product(A, dC, true, false, op);
  } else if (ta && !tb) {
    if (need_a) dA = product(B, dC, false, true, op);
    if (need_b) dB = product(A, dC, false, false, op);
  } else if (!ta && tb) {
    if (need_a) dA = product(dC, B, false, false, op);
    if (need_b) dB = product(dC, A, true, false, op);
  } else {
    if (need_a) dA = product(B, dC, true, true, op);
    if (need_b) dB = product(dC, A, true, true, op);
  }
  return {dA, dB};
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in, bool trans_a, bool trans_b) {
  ACC_PROFILE("matmul");
  detail::check_defined(a_in, "matmul", "a");
  detail::check_defined(b_in, "matmul", "b");
  const DType dtype = detail::product_dtype(a_in, b_in, "matmul");
  Tensor a = detail::in_dtype(a_in, dtype), b = detail::in_dtype(b_in, dtype);
  Tensor out = product(a, b, trans_a, trans_b, "matmul");
  const bool need_a = a_in.requires_grad(), need_b = b_in.requires_grad();
  autograd::record(
      "matmul", out, {a_in, b_in},
      [=](const Tensor& g) {
        ACC_PROFILE("matmul.backward");
        const bool want_a = need_a && autograd::input_wanted(0), want_b = need_b && autograd::input_wanted(1);
        Tensor g2 = detail::in_dtype(g, dtype);
        // A split backward's later call gets g2: made once, and held in the product's dtype.
        if (want_a != need_a || want_b != need_b) autograd::keep_for_later_call(g2);
        return product_grads(a, b, trans_a, trans_b, g2, want_a, want_b);
      },
      autograd::Inputs::separable);
  return out;
}

Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& bias_in) {
  ACC_PROFILE("linear");
  detail::check_defined(x_in, "linear", "x");
  detail::check_defined(w_in, "linear", "weight");
  ACC_CHECK(w_in.dim() == 2 && x_in.dim() >= 1 && x_in.size(-1) == w_in.size(1),
            "linear: x ", x_in.describe(), " does not fit weight ", w_in.describe(),
            " (expected x [..., in] and weight [out, in])");
  const int64_t in = w_in.size(1), out_features = w_in.size(0);
  ACC_CHECK(!bias_in.defined() || bias_in.shape() == Shape{out_features}, "linear: bias ",
            bias_in.describe(), " does not match weight ", w_in.describe(), " (expected [",
            out_features, "])");
  const DType dtype = detail::product_dtype(x_in, w_in, "linear");
  const int64_t rows = in ? x_in.numel() / in : 0;
  Tensor x = detail::in_dtype(x_in, dtype).view({rows, in});
  Tensor w = detail::in_dtype(w_in, dtype);
  Tensor bias = bias_in.defined() ? detail::as_f32(bias_in, "linear") : Tensor();

  kernels::MatmulShape s{.M = rows, .N = out_features, .K = in, .trans_b = true, .ab_type = dtype};
  Shape out_shape = x_in.shape();
  out_shape.back() = out_features;
  Tensor out = detail::new_output(out_shape);
  kernels::matmul(x.raw_data(), w.raw_data(), out.raw_data(), s,
                  bias.defined() ? bias.data<float>() : nullptr);

  const bool need_x = x_in.requires_grad(), need_w = w_in.requires_grad();
  const bool need_b = bias_in.defined() && bias_in.requires_grad();
  autograd::record(
      "linear", out, {x_in, w_in, bias_in},
      [=, x_shape = x_in.shape(), later_db = std::make_shared<Tensor>()](const Tensor& g) {
        ACC_PROFILE("linear.backward");
        const bool want_x = need_x && autograd::input_wanted(0), want_w = need_w && autograd::input_wanted(1);
        const bool want_b = need_b && autograd::input_wanted(2);
        Tensor g2 = detail::in_dtype(g, dtype);
        auto bias_grad = [&] { return detail::sum_leading(detail::as_f32(g, "linear backward"), rows, out_features); };
        // A split backward's later call gets g2 (made once, held in the product's dtype), so the
        // bias's gradient, a sum of g in f32, is made now for it.
        if ((want_x != need_x || want_w != need_w || want_b != need_b) && autograd::keep_for_later_call(g2) &&
            need_b && !want_b)
          *later_db = bias_grad();
        auto grads = product_grads(x, w, false, true, g2.view({rows, out_features}), want_x, want_w);
        Tensor dx = want_x ? grads[0].view(x_shape) : Tensor();
        Tensor db;
        if (want_b) db = later_db->defined() ? std::exchange(*later_db, Tensor()) : bias_grad();
        return std::vector<Tensor>{dx, grads[1], db};
      },
      autograd::Inputs::separable);
  return out;
}

}  // namespace acc::ops
