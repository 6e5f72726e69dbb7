#include "acc/ops/loss.h"

#include "acc/autograd/function.h"
#include "acc/kernels/cross_entropy.h"
#include "acc/ops/detail.h"
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
                     if (counted == 0) return std::vector<Tensor>{Tensor()};  // nothing counted
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

}  // namespace acc::ops
