#pragma once
// The reductions behind reduce_scatter / all_reduce in backends that move bytes themselves.
// Partial sums live in an accumulator of accumulator_dtype(dtype): f32 for f32 and bf16 (bf16
// is summed in f32 and rounded once at the end), the type itself for i32 / i64 (integer sums
// wrap around on overflow, as two's complement).
#include <cstddef>
#include <cstdint>

#include "acc/tensor/dtype.h"

namespace acc::dist::kernels {

constexpr DType accumulator_dtype(DType t) { return t == DType::bf16 ? DType::f32 : t; }

// acc[i] = src[i] (converted to the accumulator type).
void load_accumulator(void* acc, const void* src, DType dtype, int64_t n);
// acc[i] += src[i].
void add_to_accumulator(void* acc, const void* src, DType dtype, int64_t n);
// acc[i] = a[i] + b[i]: load and first addition in one pass over memory.
void sum_to_accumulator(void* acc, const void* a, const void* b, DType dtype, int64_t n);
// dst[i] = acc[i] * scale (scale must be 1 for integers); bf16 rounds to nearest even.
// May overwrite acc (it is scaled in place).
void store_accumulator(void* acc, void* dst, DType dtype, int64_t n, float scale);

// memcpy with non-temporal stores, for destinations much larger than the caches: the stores
// skip the read-for-ownership of every destination line and do not evict the working set.
// Ordered before anything this thread does afterwards (it ends with a store fence).
void copy_streaming(void* dst, const void* src, size_t bytes);
// memcpy to two destinations in one pass over src: all_gather stages its shard and keeps it in
// its output at once, reading the shard once instead of twice. dst_a takes streaming stores
// when `stream_a` (then ordered like copy_streaming), dst_b plain ones.
void copy_twice(void* dst_a, void* dst_b, const void* src, size_t bytes, bool stream_a = false);

namespace ref {
void load_accumulator(void* acc, const void* src, DType dtype, int64_t n);
void add_to_accumulator(void* acc, const void* src, DType dtype, int64_t n);
void sum_to_accumulator(void* acc, const void* a, const void* b, DType dtype, int64_t n);
void store_accumulator(void* acc, void* dst, DType dtype, int64_t n, float scale);
}  // namespace ref

}  // namespace acc::dist::kernels
