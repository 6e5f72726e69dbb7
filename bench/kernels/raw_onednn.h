#pragma once
// A bare oneDNN matmul, created once and executed directly: the ceiling that acc's
// kernels::matmul is compared with (same shapes, same layouts, no acc code on the path).
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>

namespace acc::bench {

class RawOnednnMatmul {
 public:
  // Row-major C[M,N] = op(A) * op(B), op(A) = A^T when trans_a (A stored [K,M]), op(B) = B^T
  // when trans_b (B stored [N,K]).
  RawOnednnMatmul(int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b, dnnl::memory::data_type ab);
  void run(void* a, void* b, float* c);

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul prim_;
};

}  // namespace acc::bench
