#include "acc/ops/attention.h"

#include "acc/autograd/function.h"
#include "acc/kernels/attention.h"
#include "acc/kernels/rope.h"
#include "acc/ops/detail.h"
#include "acc/util/profiler.h"

namespace acc::ops {

Tensor causal_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, double scale) {
  ACC_PROFILE("causal_attention");
  for (const Tensor* t : {&q_in, &k_in, &v_in}) detail::check_defined(*t, "causal_attention", "input");
  const bool ok = q_in.dim() == 4 && k_in.dim() == 4 && k_in.shape() == v_in.shape() &&
                  k_in.size(0) == q_in.size(0) && k_in.size(2) == q_in.size(2) &&
                  k_in.size(3) == q_in.size(3) && k_in.size(1) > 0 && q_in.size(1) % k_in.size(1) == 0;
  ACC_CHECK(ok, "causal_attention: expected q [B,H,T,D] and k, v [B,Hkv,T,D] with H % Hkv == 0, got q ",
            q_in.describe(), ", k ", k_in.describe(), ", v ", v_in.describe());
  Tensor q = detail::as_f32(q_in, "causal_attention").detach();
  Tensor k = detail::as_f32(k_in, "causal_attention").detach();
  Tensor v = detail::as_f32(v_in, "causal_attention").detach();
  const kernels::AttentionShape s{.B = q.size(0), .H = q.size(1), .Hkv = k.size(1), .T = q.size(2),
                                  .D = q.size(3), .scale = static_cast<float>(scale)};
  Tensor out = detail::new_output(q.shape());
  Tensor lse = detail::new_output({s.B, s.H, s.T});
  kernels::attention_fwd(q.data<float>(), k.data<float>(), v.data<float>(), out.data<float>(),
                         lse.data<float>(), s);
  autograd::record("causal_attention", out, {q_in, k_in, v_in},
                   [q, k, v, lse, s, y = out.detach()](const Tensor& g) {
                     ACC_PROFILE("causal_attention.backward");
                     Tensor dq = detail::new_output(q.shape());
                     Tensor dk = detail::new_output(k.shape()), dv = detail::new_output(v.shape());
                     kernels::attention_bwd(g.data<float>(), q.data<float>(), k.data<float>(),
                                            v.data<float>(), y.data<float>(), lse.data<float>(),
                                            dq.data<float>(), dk.data<float>(), dv.data<float>(), s);
                     return std::vector<Tensor>{dq, dk, dv};
                   });
  return out;
}

Tensor rope(const Tensor& x_in, double theta, int64_t pos_offset) {
  ACC_PROFILE("rope");
  detail::check_defined(x_in, "rope", "x");
  ACC_CHECK(x_in.dim() == 4 && x_in.size(3) % 2 == 0, "rope: expected x [B,H,T,D] with even D, got ",
            x_in.describe());
  Tensor x = detail::as_f32(x_in, "rope");
  const kernels::RopeShape s{.B = x.size(0), .H = x.size(1), .T = x.size(2), .D = x.size(3),
                             .theta = static_cast<float>(theta), .pos_offset = pos_offset};
  Tensor out = detail::new_output(x.shape());
  kernels::rope_fwd(x.data<float>(), out.data<float>(), s);
  autograd::record("rope", out, {x_in}, [s](const Tensor& g) {
    ACC_PROFILE("rope.backward");
    Tensor dx = detail::new_output(g.shape());
    kernels::rope_bwd(g.data<float>(), dx.data<float>(), s);
    return std::vector<Tensor>{dx};
  });
  return out;
}

}  // namespace acc::ops
