#include "acc/ops/loss.h"

#include <algorithm>

#include "acc/autograd/function.h"
#include "acc/autograd/grad_mode.h"
#include "acc/kernels/cross_entropy.h"
#include "acc/kernels/matmul.h"
#include "acc/ops/detail.h"
#include "acc/ops/elementwise.h"
#include "acc/util/profiler.h"

namespace acc::ops {

Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets_in, int32_t ignore_index,
                     DType grad_dtype) {
  ACC_PROFILE("cross_entropy");
  detail::check_defined(logits_in, "cross_entropy", "logits");
  detail::check_defined(targets_in, "cross_entropy", "targets");
  ACC_CHECK(logits_in.dim() == 2 && targets_in.shape() == Shape{logits_in.size(0)} &&
                (targets_in.dtype() == DType::i32 || targets_in.dtype() == DType::i64),
            "cross_entropy: expected logits [N, V] and integer targets [N], got logits ",
            logits_in.describe(), " and targets ", targets_in.describe());
  ACC_CHECK(is_floating(grad_dtype), "cross_entropy: grad_dtype must be f32 or bf16, got ",
            dtype_name(grad_dtype));
  Tensor logits = detail::as_f32(logits_in, "cross_entropy").detach();
  Tensor targets = targets_in.dtype() == DType::i32 ? targets_in.detach() : targets_in.to(DType::i32);
  const int64_t N = logits.size(0), V = logits.size(1);
  Tensor losses = detail::new_output({N}), lse = detail::new_output({N});
  const int64_t counted = kernels::cross_entropy_fwd(logits.data<float>(), targets.data<int32_t>(),
                                                     losses.data<float>(), lse.data<float>(), N, V,
                                                     ignore_index);
  double total = 0;
  for (float l : losses.to_vector()) total += l;
  Tensor out = detail::new_output({});
  *out.data<float>() = counted ? static_cast<float>(total / static_cast<double>(counted)) : 0.f;
  autograd::record("cross_entropy", out, {logits_in},
                   [=](const Tensor& g) {
                     ACC_PROFILE("cross_entropy.backward");
                     // Nothing counted: a zero gradient, not none, so that every parameter
                     // behind the loss still gets one (data-parallel peers reduce them all).
                     if (counted == 0) return std::vector<Tensor>{Tensor::zeros({N, V}, grad_dtype)};
                     Tensor dloss = detail::new_output({N});
                     dloss.fill_(static_cast<double>(g.item()) / static_cast<double>(counted));
                     Tensor dlogits = detail::new_output({N, V}, grad_dtype);
                     auto backward = [&](auto* out) {  // the kernel's f32 or bf16 overload
                       kernels::cross_entropy_bwd(logits.data<float>(), targets.data<int32_t>(),
                                                  lse.data<float>(), dloss.data<float>(), out, N,
                                                  V, ignore_index);
                     };
                     if (grad_dtype == DType::bf16)
                       backward(dlogits.data<bfloat16>());
                     else
                       backward(dlogits.data<float>());
                     return std::vector<Tensor>{dlogits};
                   });
  return out;
}

int64_t default_loss_chunk_rows(int64_t V) {
  constexpr int64_t kChunkBytes = int64_t{64} << 20;
  return std::max<int64_t>(512, kChunkBytes / (std::max<int64_t>(1, V) * 4) / 32 * 32);
}

Tensor linear_cross_entropy(const Tensor& x_in, const Tensor& w_in, const Tensor& targets_in,
                            int32_t ignore_index, int64_t chunk_rows) {
  ACC_PROFILE("linear_cross_entropy");
  detail::check_defined(x_in, "linear_cross_entropy", "x");
  detail::check_defined(w_in, "linear_cross_entropy", "weight");
  detail::check_defined(targets_in, "linear_cross_entropy", "targets");
  ACC_CHECK(w_in.dim() == 2 && x_in.dim() >= 1 && x_in.size(-1) == w_in.size(1) &&
                x_in.numel() / std::max<int64_t>(1, w_in.size(1)) == targets_in.numel() &&
                (targets_in.dtype() == DType::i32 || targets_in.dtype() == DType::i64),
            "linear_cross_entropy: expected x [..., C], weight [V, C] and integer targets with one "
            "per row of x, got x ",
            x_in.describe(), ", weight ", w_in.describe(), " and targets ", targets_in.describe());
  ACC_CHECK(chunk_rows >= 0, "linear_cross_entropy: chunk_rows must be >= 0, got ", chunk_rows);
  const DType dtype = detail::product_dtype(x_in, w_in, "linear_cross_entropy");
  const int64_t V = w_in.size(0), C = w_in.size(1), N = targets_in.numel();
  const Tensor x = detail::in_dtype(x_in, dtype).view({N, C});
  const Tensor w = detail::in_dtype(w_in, dtype);
  const Tensor targets =
      (targets_in.dtype() == DType::i32 ? targets_in.detach() : targets_in.to(DType::i32)).view({N});
  const int32_t* t = targets.data<int32_t>();
  const int64_t counted =
      kernels::count_and_check_targets("linear_cross_entropy", t, N, V, ignore_index);
  const bool recording = autograd::needs_grad({x_in, w_in});
  // With every row ignored nothing is computed, but backward sends zero gradients (as
  // cross_entropy does), so that every parameter behind the loss still gets one.
  const bool need_x = recording && counted && x_in.requires_grad();
  const bool need_w = recording && counted && w_in.requires_grad();

  const int64_t R = std::min(N, chunk_rows ? chunk_rows : default_loss_chunk_rows(V));
  const size_t row_bytes = static_cast<size_t>(C) * dtype_size(dtype);
  Tensor logits = detail::new_output({R, V});  // one chunk; its f32 gradient is written in place
  Tensor dlogits_bf16 = (need_x || need_w) && dtype == DType::bf16 ? detail::new_output({R, V}, dtype) : Tensor();
  Tensor losses = detail::new_output({R}), lse = detail::new_output({R});
  Tensor dloss = detail::new_output({R});
  dloss.fill_(counted ? 1.0 / static_cast<double>(counted) : 0.0);
  Tensor dx = need_x ? detail::new_output({N, C}) : Tensor();
  Tensor dw = need_w ? detail::new_output({V, C}) : Tensor();
  if (recording && !counted) {
    if (x_in.requires_grad()) dx = Tensor::zeros({N, C});
    if (w_in.requires_grad()) dw = Tensor::zeros({V, C});
  }

  double total = 0;
  for (int64_t r0 = 0; r0 < N; r0 += R) {
    const int64_t rows = std::min(R, N - r0);
    const auto* xr = static_cast<const char*>(x.raw_data()) + static_cast<size_t>(r0) * row_bytes;
    kernels::matmul(xr, w.raw_data(), logits.raw_data(),
                    {.M = rows, .N = V, .K = C, .trans_b = true, .ab_type = dtype});
    kernels::cross_entropy_fwd(logits.data<float>(), t + r0, losses.data<float>(), lse.data<float>(),
                               rows, V, ignore_index);
    const float* l = losses.data<float>();
    for (int64_t i = 0; i < rows; ++i) total += l[i];
    if (!need_x && !need_w) continue;
    void* grad = logits.raw_data();
    if (dtype == DType::bf16) {
      grad = dlogits_bf16.raw_data();
      kernels::cross_entropy_bwd(logits.data<float>(), t + r0, lse.data<float>(), dloss.data<float>(),
                                 static_cast<bfloat16*>(grad), rows, V, ignore_index);
    } else {
      kernels::cross_entropy_bwd(logits.data<float>(), t + r0, lse.data<float>(), dloss.data<float>(),
                                 logits.data<float>(), rows, V, ignore_index);
    }
    if (need_x)  // dx rows = dlogits · W
      kernels::matmul(grad, w.raw_data(), dx.data<float>() + r0 * C,
                      {.M = rows, .N = C, .K = V, .ab_type = dtype});
    if (need_w)  // dW += dlogits^T · x rows
      kernels::matmul(grad, xr, dw.raw_data(),
                      {.M = V, .N = C, .K = rows, .trans_a = true, .ab_type = dtype, .accumulate = r0 > 0});
  }
  Tensor out = detail::new_output({});
  *out.data<float>() = counted ? static_cast<float>(total / static_cast<double>(counted)) : 0.f;
  if (!recording) return out;
  // The chunk buffers go now; the gradients stay until backward hands them on.
  logits = dlogits_bf16 = Tensor();
  autograd::record("linear_cross_entropy", out, {x_in, w_in},
                   [dx, dw, x_shape = x_in.shape()](const Tensor& g) {
                     ACC_PROFILE("linear_cross_entropy.backward");
                     const double s = static_cast<double>(g.item());
                     auto scaled = [s](const Tensor& grad) {
                       if (!grad.defined() || s == 1.0) return grad;  // loss.backward(): as made
                       autograd::NoGradGuard no_grad;
                       return ops::scale(grad, s);
                     };
                     Tensor gx = scaled(dx);
                     return std::vector<Tensor>{gx.defined() ? gx.view(x_shape) : gx, scaled(dw)};
                   });
  return out;
}

}  // namespace acc::ops
