#pragma once
// Embedding lookup: out[i, :] = table[ids[i], :], table [V, C] f32 (or bf16, each looked-up
// row widened to f32 on the way: a bf16 compute copy of a table needs no f32 copy of all of it),
// ids int32 [N].
// Backward accumulates (+=) into dtable, deterministically (no atomics; the result does not
// depend on thread count). Out-of-range ids throw acc::Error naming the position and value.
#include <cstdint>

#include "acc/kernels/convert.h"

namespace acc::kernels {

void embedding_fwd(const float* table, const int32_t* ids, float* out, int64_t N, int64_t V, int64_t C);
void embedding_fwd(const bfloat16* table, const int32_t* ids, float* out, int64_t N, int64_t V, int64_t C);
void embedding_bwd(const float* dout, const int32_t* ids, float* dtable, int64_t N, int64_t V, int64_t C);

namespace ref {
void embedding_fwd(const float* table, const int32_t* ids, float* out, int64_t N, int64_t V, int64_t C);
void embedding_fwd(const bfloat16* table, const int32_t* ids, float* out, int64_t N, int64_t V, int64_t C);
void embedding_bwd(const float* dout, const int32_t* ids, float* dtable, int64_t N, int64_t V, int64_t C);
}  // namespace ref

}  // namespace acc::kernels
