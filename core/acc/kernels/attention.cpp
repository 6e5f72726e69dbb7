#include "acc/kernels/attention.h"

#include <immintrin.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "acc/kernels/block_gemm.h"
#include "acc/kernels/detail/avx2_math.h"
#include "acc/runtime/threads.h"
#include "acc/util/error.h"

namespace acc::kernels {
namespace {

using detail::block_gemm;
using detail::for_each_lanes;
using detail::Lanes;

// Query and key tile sizes: a 64x64 score tile plus 64xD operand tiles stay in L1/L2.
constexpr int64_t kQBlock = 64;
constexpr int64_t kKBlock = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Resolved shape plus pointer arithmetic for the [B, heads, T, D] layout.
struct Geometry {
  int64_t B, H, Hkv, T, D, group;
  float scale;
  int64_t head(int64_t b, int64_t h, int64_t heads) const { return ((b * heads + h) * T) * D; }
  int64_t q_head(int64_t b, int64_t h) const { return head(b, h, H); }
  int64_t kv_head(int64_t b, int64_t hk) const { return head(b, hk, Hkv); }
};

Geometry resolve(const char* op, const AttentionShape& s) {
  ACC_CHECK(s.B >= 0 && s.T >= 0 && s.D >= 1 && s.H >= 1 && s.Hkv >= 1 && s.H % s.Hkv == 0, op,
            ": expected B, T >= 0, D >= 1 and H a multiple of Hkv >= 1, got B=", s.B, " H=", s.H,
            " Hkv=", s.Hkv, " T=", s.T, " D=", s.D);
  const float scale = s.scale != 0.f ? s.scale : 1.f / std::sqrt(static_cast<float>(s.D));
  return {s.B, s.H, s.Hkv, s.T, s.D, s.H / s.Hkv, scale};
}

// Rows [0, n) of a [*, D] head block, transposed into [D, kKBlock] so that score rows
// (one query against the block's keys) come out of block_gemm contiguous.
void pack_transposed(const float* rows, int64_t n, int64_t D, float* out) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t d = 0; d < D; ++d) out[d * kKBlock + j] = rows[j * D + d];
}

// Number of keys in [k0, k0 + nk) that query position qi may see (causal: key <= query).
int64_t visible_keys(int64_t qi, int64_t k0, int64_t nk) {
  return std::clamp<int64_t>(qi - k0 + 1, 0, nk);
}

__m256 fill_tail(const Lanes& lanes, __m256 v, float fill) {
  return lanes.full ? v
                    : _mm256_blendv_ps(_mm256_set1_ps(fill), v, _mm256_castsi256_ps(lanes.mask));
}

// s[j] *= scale for j < n; returns the largest result.
float scale_and_max(float* s, int64_t n, float scale) {
  __m256 mx = _mm256_set1_ps(kNegInf);
  for_each_lanes(n, [&](int64_t j, const Lanes& lanes) {
    const __m256 v = _mm256_mul_ps(lanes.load(s + j), _mm256_set1_ps(scale));
    lanes.store(s + j, v);
    mx = _mm256_max_ps(mx, fill_tail(lanes, v, kNegInf));
  });
  return detail::hmax(mx);
}

// s[j] = exp(s[j] * scale - shift) for j < n; returns the sum of the results.
float exp_and_sum(float* s, int64_t n, float scale, float shift) {
  __m256 sum = _mm256_setzero_ps();
  for_each_lanes(n, [&](int64_t j, const Lanes& lanes) {
    const __m256 x =
        _mm256_fmsub_ps(lanes.load(s + j), _mm256_set1_ps(scale), _mm256_set1_ps(shift));
    const __m256 p = detail::exp256(x);
    lanes.store(s + j, p);
    sum = _mm256_add_ps(sum, fill_tail(lanes, p, 0.f));
  });
  return detail::hsum(sum);
}

void scale_row(float* x, int64_t n, float a) {
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

// One query block of one head: streams over the visible key blocks with an online softmax.
void forward_query_block(const Geometry& g, const float* q, const float* k, const float* v,
                         int64_t q0, int64_t nq, float* out, float* lse) {
  const int64_t D = g.D;
  std::vector<float> scores(kQBlock * kKBlock), kt(D * kKBlock), acc(nq * D, 0.f);
  std::vector<float> row_max(nq, kNegInf), row_sum(nq, 0.f);
  const int64_t key_end = q0 + nq;  // causal: no query in this block sees a later key
  for (int64_t k0 = 0; k0 < key_end; k0 += kKBlock) {
    const int64_t nk = std::min(kKBlock, key_end - k0);
    pack_transposed(k + k0 * D, nk, D, kt.data());
    block_gemm(nq, nk, D, q, D, 1, kt.data(), kKBlock, scores.data(), kKBlock, false);
    for (int64_t i = 0; i < nq; ++i) {
      float* s = scores.data() + i * kKBlock;
      const int64_t visible = visible_keys(q0 + i, k0, nk);
      std::fill(s + visible, s + nk, 0.f);
      if (visible == 0) continue;
      const float m_new = std::max(row_max[i], scale_and_max(s, visible, g.scale));
      const float rescale = std::exp(row_max[i] - m_new);  // exp(-inf) = 0 on the first block
      row_sum[i] = row_sum[i] * rescale + exp_and_sum(s, visible, 1.f, m_new);
      row_max[i] = m_new;
      if (rescale != 1.f) scale_row(acc.data() + i * D, D, rescale);
    }
    block_gemm(nq, D, nk, scores.data(), kKBlock, 1, v + k0 * D, D, acc.data(), D, true);
  }
  for (int64_t i = 0; i < nq; ++i) {
    const float inv = 1.f / row_sum[i];
    for (int64_t d = 0; d < D; ++d) out[i * D + d] = acc[i * D + d] * inv;
    lse[i] = row_max[i] + std::log(row_sum[i]);
  }
}

// Backward work for one kv head, or for every `splits`-th of its key blocks: dK and dV rows of
// those key blocks, and the dQ contribution of those blocks for the query heads sharing the kv
// head, written to `dq_group` ([group, T, D], zeroed here). Tasks never share output memory.
struct BackwardTask {
  const Geometry& g;
  const float *dout, *q, *k, *v, *out, *lse;
  float *dk, *dv;
  int64_t splits;

  void run(int64_t b, int64_t hk, int64_t part, float* dq_group) const {
    const int64_t T = g.T, D = g.D;
    const int64_t kv = g.kv_head(b, hk), q_first = g.q_head(b, hk * g.group);
    std::fill(dq_group, dq_group + g.group * T * D, 0.f);
    // delta[i] = rowsum(dO * O) per query row of every head in the group.
    std::vector<float> delta(g.group * T);
    for (int64_t i = 0; i < g.group * T; ++i) {
      float sum = 0.f;
      for (int64_t d = 0; d < D; ++d) sum += dout[q_first + i * D + d] * out[q_first + i * D + d];
      delta[i] = sum;
    }
    std::vector<float> kt(D * kKBlock), vt(D * kKBlock), p(kQBlock * kKBlock),
        ds(kQBlock * kKBlock);
    // Round-robin over key blocks: early blocks see more queries, so this balances the parts.
    for (int64_t k0 = part * kKBlock; k0 < T; k0 += splits * kKBlock) {
      const int64_t nk = std::min(kKBlock, T - k0);
      const float* k_blk = k + kv + k0 * D;
      pack_transposed(k_blk, nk, D, kt.data());
      pack_transposed(v + kv + k0 * D, nk, D, vt.data());
      float* dk_blk = dk + kv + k0 * D;
      float* dv_blk = dv + kv + k0 * D;
      std::fill(dk_blk, dk_blk + nk * D, 0.f);
      std::fill(dv_blk, dv_blk + nk * D, 0.f);
      for (int64_t j = 0; j < g.group; ++j) {
        const int64_t qh = q_first + j * T * D;
        // Query blocks that see at least one key of this block.
        for (int64_t q0 = k0 / kQBlock * kQBlock; q0 < T; q0 += kQBlock) {
          const int64_t nq = std::min(kQBlock, T - q0);
          const float* q_blk = q + qh + q0 * D;
          const float* do_blk = dout + qh + q0 * D;
          const float* lse_blk = lse + (b * g.H + hk * g.group + j) * T + q0;
          const float* delta_blk = delta.data() + j * T + q0;
          // P = exp(S * scale - lse), zero where causally masked.
          block_gemm(nq, nk, D, q_blk, D, 1, kt.data(), kKBlock, p.data(), kKBlock, false);
          for (int64_t i = 0; i < nq; ++i) {
            float* row = p.data() + i * kKBlock;
            const int64_t visible = visible_keys(q0 + i, k0, nk);
            exp_and_sum(row, visible, g.scale, lse_blk[i]);
            std::fill(row + visible, row + nk, 0.f);
          }
          // dV += P^T dO
          block_gemm(nk, D, nq, p.data(), 1, kKBlock, do_blk, D, dv_blk, D, true);
          // dS = P * (dO V^T - delta) * scale  (scale folded in here for both dQ and dK)
          block_gemm(nq, nk, D, do_blk, D, 1, vt.data(), kKBlock, ds.data(), kKBlock, false);
          for (int64_t i = 0; i < nq; ++i) {
            float* dsr = ds.data() + i * kKBlock;
            const float* pr = p.data() + i * kKBlock;
            for (int64_t c = 0; c < nk; ++c) dsr[c] = pr[c] * (dsr[c] - delta_blk[i]) * g.scale;
          }
          // dQ += dS K,  dK += dS^T Q
          float* dq_blk = dq_group + j * T * D + q0 * D;
          block_gemm(nq, D, nk, ds.data(), kKBlock, 1, k_blk, D, dq_blk, D, true);
          block_gemm(nk, D, nq, ds.data(), 1, kKBlock, q_blk, D, dk_blk, D, true);
        }
      }
    }
  }
};

}  // namespace

void attention_fwd(const float* q, const float* k, const float* v, float* out, float* lse,
                   const AttentionShape& s) {
  const Geometry g = resolve("attention_fwd", s);
  const int64_t q_blocks = (g.T + kQBlock - 1) / kQBlock;
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, g.B * g.H * q_blocks),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      for (int64_t t = r.begin(); t < r.end(); ++t) {
                        const int64_t qb = t % q_blocks, bh = t / q_blocks;
                        const int64_t b = bh / g.H, h = bh % g.H;
                        const int64_t q0 = qb * kQBlock, nq = std::min(kQBlock, g.T - q0);
                        const int64_t qh = g.q_head(b, h), kv = g.kv_head(b, h / g.group);
                        forward_query_block(g, q + qh + q0 * g.D, k + kv, v + kv, q0, nq,
                                            out + qh + q0 * g.D, lse + bh * g.T + q0);
                      }
                    });
}

void attention_bwd(const float* dout, const float* q, const float* k, const float* v,
                   const float* out, const float* lse, float* dq, float* dk, float* dv,
                   const AttentionShape& s) {
  const Geometry g = resolve("attention_bwd", s);
  if (g.B == 0 || g.T == 0) return;
  // One task per (b, kv head) writes its dQ in place. With fewer kv heads than threads, key
  // blocks are split across tasks that each sum dQ privately, and the parts are added after.
  const int64_t pairs = g.B * g.Hkv, k_blocks = (g.T + kKBlock - 1) / kKBlock;
  const int64_t threads = runtime::num_threads();
  const int64_t splits = pairs >= threads ? 1 : std::min(k_blocks, (threads + pairs - 1) / pairs);
  const int64_t group_size = g.group * g.T * g.D;
  std::vector<float> partial(splits > 1 ? pairs * splits * group_size : 0);
  const BackwardTask task{g, dout, q, k, v, out, lse, dk, dv, splits};
  tbb::parallel_for(int64_t{0}, pairs * splits, [&](int64_t t) {
    const int64_t pair = t / splits, part = t % splits;
    const int64_t b = pair / g.Hkv, hk = pair % g.Hkv;
    task.run(b, hk, part,
             splits == 1 ? dq + g.q_head(b, hk * g.group) : partial.data() + t * group_size);
  });
  if (splits == 1) return;
  tbb::parallel_for(int64_t{0}, pairs, [&](int64_t pair) {
    float* dst = dq + pair * group_size;  // a kv head's query heads are consecutive in dq
    const float* parts = partial.data() + pair * splits * group_size;
    std::copy_n(parts, group_size, dst);
    for (int64_t part = 1; part < splits; ++part)
      for (int64_t i = 0; i < group_size; ++i) dst[i] += parts[part * group_size + i];
  });
}

}  // namespace acc::kernels
