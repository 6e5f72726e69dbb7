#pragma once
// Causal scaled-dot-product self-attention, f32, layout [B, H, T, D] contiguous.
// Grouped-query attention: q has H heads, k and v have Hkv heads (H % Hkv == 0); query head h
// reads kv head h / (H / Hkv). scale is usually 1/sqrt(D).
// The forward is blocked (flash-style online softmax): it never holds a B*H*T*T f32 matrix, and
// saves only the per-row log-sum-exp lse [B, H, T] for the backward, which recomputes scores
// block by block. Backward writes dq, dk, dv (it does not accumulate).
#include <cstdint>

namespace acc::kernels {

struct AttentionShape {
  int64_t B = 0, H = 0, Hkv = 0, T = 0, D = 0;
  float scale = 0.f;  // 0 means 1/sqrt(D)
};

void attention_fwd(const float* q, const float* k, const float* v, float* out, float* lse,
                   const AttentionShape& s);
void attention_bwd(const float* dout, const float* q, const float* k, const float* v,
                   const float* out, const float* lse, float* dq, float* dk, float* dv,
                   const AttentionShape& s);

namespace ref {
// Materialises the full score matrix in double precision; for tests only.
void attention_fwd(const float* q, const float* k, const float* v, float* out, float* lse,
                   const AttentionShape& s);
void attention_bwd(const float* dout, const float* q, const float* k, const float* v,
                   const float* out, const float* lse, float* dq, float* dk, float* dv,
                   const AttentionShape& s);
}  // namespace ref

}  // namespace acc::kernels
