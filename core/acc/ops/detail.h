#pragma once
// Internal helpers shared by the op files (not part of the public ops API).
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <string_view>

#include "acc/tensor/tensor.h"

namespace acc::ops::detail {

// Elements per parallel task: below this, threading costs more than it saves.
inline constexpr int64_t kGrain = 1 << 14;

// fn(begin, end) over [0, n) in parallel blocks of at least `grain` indices.
template <class Fn>
void parallel_range(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= grain) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain),
                    [&](const tbb::blocked_range<int64_t>& r) { fn(r.begin(), r.end()); });
}

// Ops compute in f32: returns t itself when f32, an f32 copy when bf16, and throws for integers.
Tensor as_f32(const Tensor& t, std::string_view op);

// The dtype a product of a and b computes in: bf16 when either is bf16 (mixed precision hands
// products bf16 weights), else f32. Throws naming `op` for integer operands.
DType product_dtype(const Tensor& a, const Tensor& b, std::string_view op);

// t in dtype, without autograd state: a detached handle, or a converted copy (activations).
Tensor in_dtype(const Tensor& t, DType dtype);

// A new f32 (or given dtype) tensor counted as activations: every op's forward output.
Tensor new_output(const Shape& shape, DType dtype = DType::f32);

void check_defined(const Tensor& t, std::string_view op, std::string_view what);

// Sums an f32 [rows, inner] tensor over rows into a new [inner] tensor (not recorded): the
// gradient of a broadcast operand or a bias.
Tensor sum_leading(const Tensor& g, int64_t rows, int64_t inner);

// Normalises a possibly negative dimension index of a rank-`rank` tensor.
int64_t wrap_dim(int64_t dim, int64_t rank, std::string_view op);

}  // namespace acc::ops::detail
