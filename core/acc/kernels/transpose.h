#pragma once
// A matrix of 32-bit elements copied transposed: out[c * out_stride + r] = in[r * in_stride + c]
// for r < rows, c < cols. Elements are moved as bits (floats, ints alike; NaN payloads kept).
// In 8 x 8 AVX2 tiles, 16 columns at a time down every row: each input cache line is used
// whole and the output is written as 16 sequential streams. A plain loop that reads a column
// per output row touches a new cache line per element (4-15x slower on GPT-2's MLP weights).
// Single-threaded: callers split the work (checkpoint reads, one piece per thread).
#include <cstdint>

namespace acc::kernels {

void transpose32(const float* in, int64_t in_stride, float* out, int64_t out_stride, int64_t rows, int64_t cols);

namespace ref {
void transpose32(const float* in, int64_t in_stride, float* out, int64_t out_stride, int64_t rows, int64_t cols);
}  // namespace ref

}  // namespace acc::kernels
