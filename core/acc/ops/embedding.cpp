#include "acc/ops/embedding.h"

#include "acc/autograd/function.h"
#include "acc/autograd/row_gradients.h"
#include "acc/kernels/embedding.h"
#include "acc/ops/detail.h"
#include "acc/util/profiler.h"

namespace acc::ops {

Tensor embedding(const Tensor& table_in, const Tensor& ids_in) {
  ACC_PROFILE("embedding");
  detail::check_defined(table_in, "embedding", "table");
  detail::check_defined(ids_in, "embedding", "ids");
  ACC_CHECK(table_in.dim() == 2, "embedding: table must be [V, C], got ", table_in.describe());
  ACC_CHECK(ids_in.dtype() == DType::i32 || ids_in.dtype() == DType::i64,
            "embedding: ids must be i32 or i64, got ", ids_in.describe());
  ACC_CHECK(is_floating(table_in.dtype()), "embedding: table must be f32 or bf16, got ", table_in.describe());
  Tensor ids = ids_in.dtype() == DType::i32 ? ids_in.detach() : ids_in.to(DType::i32);
  const int64_t V = table_in.size(0), C = table_in.size(1), N = ids.numel();
  Shape out_shape = ids.shape();
  out_shape.push_back(C);
  Tensor out = detail::new_output(out_shape);
  // A bf16 table's looked-up rows are widened alone: no f32 copy of the whole [V, C] table.
  if (table_in.dtype() == DType::bf16)
    kernels::embedding_fwd(table_in.data<bfloat16>(), ids.data<int32_t>(), out.data<float>(), N, V, C);
  else
    kernels::embedding_fwd(table_in.data<float>(), ids.data<int32_t>(), out.data<float>(), N, V, C);
  // The table's identity only, to find a RowGradients scope summing its rows.
  const TensorImpl* table = table_in.impl().get();
  autograd::record("embedding", out, {table_in}, [ids, V, C, N, table](const Tensor& g) {
    ACC_PROFILE("embedding.backward");
    if (const Tensor sum = autograd::RowGradients::sum_for(table, {V, C}); sum.defined()) {
      kernels::embedding_bwd(g.data<float>(), ids.data<int32_t>(), sum.data<float>(), N, V, C);
      return std::vector<Tensor>{Tensor()};
    }
    Tensor dtable = detail::new_output({V, C});
    dtable.zero_();
    kernels::embedding_bwd(g.data<float>(), ids.data<int32_t>(), dtable.data<float>(), N, V, C);
    return std::vector<Tensor>{dtable};
  });
  return out;
}

}  // namespace acc::ops
