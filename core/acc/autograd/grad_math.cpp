#include "acc/autograd/grad_math.h"

#include <tbb/parallel_for.h>

#include "acc/kernels/convert.h"

namespace acc::autograd {

namespace {

constexpr int64_t kGrain = 1 << 15;

template <class Op>
void for_blocks(int64_t n, Op op) {
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, kGrain),
                    [&](const tbb::blocked_range<int64_t>& r) { op(r.begin(), r.end()); });
}

float load(const Tensor& t, const void* p, int64_t i) {
  return t.dtype() == DType::f32 ? static_cast<const float*>(p)[i]
                                 : kernels::to_f32(static_cast<const bfloat16*>(p)[i]);
}

}  // namespace

void add_into(const Tensor& dst, const Tensor& src) {
  ACC_CHECK(dst.numel() == src.numel(), "autograd: cannot add gradient ", src.describe(), " into ",
            dst.describe());
  ACC_CHECK(is_floating(dst.dtype()) && is_floating(src.dtype()),
            "autograd: gradients must be f32 or bf16, got ", dst.describe(), " and ", src.describe());
  const void* s = src.raw_data();
  if (dst.dtype() == DType::f32 && src.dtype() == DType::f32) {
    float* d = dst.data<float>();
    const float* sf = static_cast<const float*>(s);
    for_blocks(dst.numel(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) d[i] += sf[i];
    });
    return;
  }
  void* d = dst.raw_data();
  for_blocks(dst.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float sum = load(dst, d, i) + load(src, s, i);
      if (dst.dtype() == DType::f32)
        static_cast<float*>(d)[i] = sum;
      else
        static_cast<bfloat16*>(d)[i] = kernels::to_bf16(sum);
    }
  });
}

Tensor sum_gradients(Tensor a, const Tensor& b) {
  const bool exclusive = a.impl().use_count() == 1 && a.storage().use_count() == 1 &&
                         a.dtype() == DType::f32;
  if (!exclusive) a = a.to(DType::f32);  // a copy
  add_into(a, b);
  return a;
}

}  // namespace acc::autograd
