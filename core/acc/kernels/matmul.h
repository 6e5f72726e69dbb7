#pragma once
// Matrix products through oneDNN. All matrices are row-major and contiguous.
//   C[M,N] (+)= op(A) * op(B),  op(A) is A[M,K] or, with trans_a, A stored as [K,M];
//                              op(B) is B[K,N] or, with trans_b, B stored as [N,K].
// A and B are f32 or bf16 (both the same), C is f32 or bf16; accumulation is always f32.
// Primitives are cached by (shapes, dtypes, transposition, accumulate, bias). bf16 inputs use
// oneDNN's bf16 kernels where the CPU has native bf16 (AVX512-BF16/AMX); elsewhere they are
// converted to f32 first, since emulated bf16 GEMM is slower than that. On AMX, a large A
// stored transposed or B stored [K,N] is first copied into the other layout (matmul.cpp).
#include <cstdint>
#include <string>

#include "acc/tensor/dtype.h"

namespace acc::kernels {

struct MatmulShape {
  int64_t M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  DType ab_type = DType::f32;  // A and B
  DType c_type = DType::f32;
  bool accumulate = false;  // C += product instead of C = product (needs c_type f32)
};

// bias (optional, f32, length N) is added to every row of C.
void matmul(const void* A, const void* B, void* C, const MatmulShape& s, const float* bias = nullptr);

// `batch` independent products; the i-th uses A + i*stride_a, B + i*stride_b, C + i*stride_c
// (strides in elements).
void batched_matmul(int64_t batch, const void* A, int64_t stride_a, const void* B, int64_t stride_b,
                    void* C, int64_t stride_c, const MatmulShape& s);

// True when bf16 products run natively on this CPU (reported by benchmarks and `accelerate env`).
bool has_native_bf16();
// "oneDNN 3.0.0, ISA avx512_core_bf16": the library's version and the instruction set it
// dispatches to on this CPU (for `accelerate env`).
std::string onednn_description();

namespace ref {
// Plain triple loop in double precision; same contract as kernels::matmul.
void matmul(const void* A, const void* B, void* C, const MatmulShape& s, const float* bias = nullptr);
}  // namespace ref

}  // namespace acc::kernels
