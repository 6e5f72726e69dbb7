#include "acc/kernels/embedding.h"

#include <algorithm>
#include <cstring>

#include "acc/kernels/detail/parallel.h"
#include "acc/util/error.h"

namespace acc::kernels {
namespace {

// Columns per backward task: every task walks all N ids in order over its own column slice, so
// each dtable element receives its additions in ascending position order whatever the threads.
constexpr int64_t kColBlock = 64;

void check_args(const char* op, const int32_t* ids, int64_t N, int64_t V, int64_t C) {
  ACC_CHECK(N >= 0 && V > 0 && C > 0, op, ": expected N >= 0, V > 0, C > 0, got N=", N, " V=", V,
            " C=", C);
  for (int64_t i = 0; i < N; ++i)
    ACC_CHECK(ids[i] >= 0 && ids[i] < V, op, ": id at position ", i, " is ", ids[i],
              ", expected 0 <= id < V=", V);
}

}  // namespace

void embedding_fwd(const float* table, const int32_t* ids, float* out, int64_t N, int64_t V, int64_t C) {
  check_args("embedding_fwd", ids, N, V, C);
  detail::parallel_ranges(N, detail::rows_grain(C), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(out + i * C, table + static_cast<int64_t>(ids[i]) * C, static_cast<size_t>(C) * sizeof(float));
  });
}

void embedding_fwd(const bfloat16* table, const int32_t* ids, float* out, int64_t N, int64_t V, int64_t C) {
  check_args("embedding_fwd", ids, N, V, C);
  detail::parallel_ranges(N, detail::rows_grain(C), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) bf16_to_f32(table + static_cast<int64_t>(ids[i]) * C, out + i * C, C);
  });
}

void embedding_bwd(const float* dout, const int32_t* ids, float* dtable, int64_t N, int64_t V, int64_t C) {
  check_args("embedding_bwd", ids, N, V, C);
  const int64_t blocks = (C + kColBlock - 1) / kColBlock;
  // Grain in column blocks: a task should stream about kElemsPerTask values of dout.
  const int64_t grain = std::max<int64_t>(1, detail::kElemsPerTask / std::max<int64_t>(1, N * kColBlock));
  detail::parallel_ranges(blocks, grain, [&](int64_t b0, int64_t b1) {
    const int64_t c0 = b0 * kColBlock, c1 = std::min(C, b1 * kColBlock);
    for (int64_t i = 0; i < N; ++i) {
      const float* src = dout + i * C;
      float* dst = dtable + static_cast<int64_t>(ids[i]) * C;
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  });
}

namespace ref {
void embedding_fwd(const float* table, const int32_t* ids, float* out, int64_t N, int64_t V, int64_t C) {
  check_args("embedding_fwd", ids, N, V, C);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t c = 0; c < C; ++c) out[i * C + c] = table[ids[i] * C + c];
}
void embedding_fwd(const bfloat16* table, const int32_t* ids, float* out, int64_t N, int64_t V, int64_t C) {
  check_args("embedding_fwd", ids, N, V, C);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t c = 0; c < C; ++c) out[i * C + c] = to_f32(table[ids[i] * C + c]);
}
void embedding_bwd(const float* dout, const int32_t* ids, float* dtable, int64_t N, int64_t V, int64_t C) {
  check_args("embedding_bwd", ids, N, V, C);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t c = 0; c < C; ++c) dtable[ids[i] * C + c] += dout[i * C + c];
}
}  // namespace ref

}  // namespace acc::kernels
