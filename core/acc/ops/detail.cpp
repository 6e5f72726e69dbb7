#include "acc/ops/detail.h"

#include <algorithm>

namespace acc::ops::detail {

void check_defined(const Tensor& t, std::string_view op, std::string_view what) {
  ACC_CHECK(t.defined(), op, ": ", what, " is undefined");
}

Tensor as_f32(const Tensor& t, std::string_view op) {
  check_defined(t, op, "input");
  ACC_CHECK(is_floating(t.dtype()), op, ": expected an f32 or bf16 tensor, got ", t.describe());
  if (t.dtype() == DType::f32) return t;
  memory::CategoryScope scope(memory::Category::activations);
  return t.to(DType::f32);
}

DType product_dtype(const Tensor& a, const Tensor& b, std::string_view op) {
  ACC_CHECK(is_floating(a.dtype()) && is_floating(b.dtype()), op, ": expected f32/bf16 operands, got ",
            a.describe(), " and ", b.describe());
  return a.dtype() == DType::bf16 || b.dtype() == DType::bf16 ? DType::bf16 : DType::f32;
}

Tensor in_dtype(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t.detach();
  memory::CategoryScope scope(memory::Category::activations);
  return t.to(dtype);
}

Tensor new_output(const Shape& shape, DType dtype) {
  memory::CategoryScope scope(memory::Category::activations);
  return Tensor::empty(shape, dtype);
}

Tensor sum_leading(const Tensor& g, int64_t rows, int64_t inner) {
  Tensor out = new_output({inner});
  const float* pg = g.data<float>();
  float* po = out.data<float>();
  // Parallel over columns: each task owns its outputs, so the sum needs no reduction step.
  parallel_range(inner, std::max<int64_t>(64, kGrain / std::max<int64_t>(1, rows)),
                 [&](int64_t s, int64_t e) {
                   std::fill(po + s, po + e, 0.f);
                   for (int64_t r = 0; r < rows; ++r) {
                     const float* row = pg + r * inner;
                     for (int64_t j = s; j < e; ++j) po[j] += row[j];
                   }
                 });
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t rank, std::string_view op) {
  ACC_CHECK(dim >= -rank && dim < rank, op, ": dimension ", dim, " out of range for rank ", rank);
  return dim < 0 ? dim + rank : dim;
}

}  // namespace acc::ops::detail
