// Reference matmul: a plain triple loop in double, for tests.

#include "acc/kernels/convert.h"
#include "acc/kernels/matmul.h"
#include "acc/util/error.h"

namespace acc::kernels::ref {
namespace {

double load(const void* p, int64_t i, DType t) {
  return t == DType::bf16 ? to_f32(static_cast<const bfloat16*>(p)[i])
                          : static_cast<const float*>(p)[i];
}

}  // namespace

void matmul(const void* A, const void* B, void* C, const MatmulShape& s, const float* bias) {
  ACC_CHECK(!s.accumulate || s.c_type == DType::f32, "ref::matmul: accumulate needs an f32 C");
  for (int64_t i = 0; i < s.M; ++i)
    for (int64_t j = 0; j < s.N; ++j) {
      double sum = bias ? bias[j] : 0.0;
      for (int64_t k = 0; k < s.K; ++k) {
        const int64_t ia = s.trans_a ? k * s.M + i : i * s.K + k;
        const int64_t ib = s.trans_b ? j * s.K + k : k * s.N + j;
        sum += load(A, ia, s.ab_type) * load(B, ib, s.ab_type);
      }
      const int64_t ic = i * s.N + j;
      if (s.c_type == DType::bf16) {
        static_cast<bfloat16*>(C)[ic] = to_bf16(static_cast<float>(sum));
      } else {
        float& c = static_cast<float*>(C)[ic];
        c = static_cast<float>(s.accumulate ? c + sum : sum);
      }
    }
}

}  // namespace acc::kernels::ref
