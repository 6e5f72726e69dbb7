#include "acc/kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "acc/kernels/block_gemm.h"
#include "acc/kernels/matmul.h"
#include "acc/runtime/threads.h"
#include "acc/util/error.h"
#include "support/test_support.h"

namespace acc::kernels {
namespace {

using test::all_close;
using test::random_vector;

struct Inputs {
  std::vector<float> q, k, v, dout;
  Inputs(const AttentionShape& s, uint64_t seed)
      : q(random_vector(s.B * s.H * s.T * s.D, seed)),
        k(random_vector(s.B * s.Hkv * s.T * s.D, seed + 1)),
        v(random_vector(s.B * s.Hkv * s.T * s.D, seed + 2)),
        dout(random_vector(s.B * s.H * s.T * s.D, seed + 3)) {}
};

struct Results {
  std::vector<float> out, lse, dq, dk, dv;
};

template <class Fwd, class Bwd>
Results run(const AttentionShape& s, const Inputs& in, Fwd fwd, Bwd bwd) {
  const int64_t nq = s.B * s.H * s.T * s.D, nkv = s.B * s.Hkv * s.T * s.D;
  Results r{std::vector<float>(nq, NAN), std::vector<float>(s.B * s.H * s.T, NAN),
            std::vector<float>(nq, NAN), std::vector<float>(nkv, NAN),
            std::vector<float>(nkv, NAN)};
  fwd(in.q.data(), in.k.data(), in.v.data(), r.out.data(), r.lse.data(), s);
  bwd(in.dout.data(), in.q.data(), in.k.data(), in.v.data(), r.out.data(), r.lse.data(),
      r.dq.data(), r.dk.data(), r.dv.data(), s);
  return r;
}

// Blocked f32 (online softmax, exp to ~1 ulp) against a double reference: errors come from f32
// sums over <= 2*130 terms of O(1) values, ~1e-6; 2e-5 absolute + 1e-4 relative is a safe bound
// that any indexing or masking mistake (O(0.1) and up) still breaks.
constexpr float kRtol = 1e-4f, kAtol = 2e-5f;

TEST(Attention, ForwardAndBackwardMatchReference) {
  uint64_t seed = 1;
  for (int64_t T : {1, 7, 33, 130})
    for (int64_t D : {8, 64})
      for (int64_t Hkv : {4, 2, 1}) {
        const AttentionShape s{2, 4, Hkv, T, D};
        const Inputs in(s, seed += 10);
        const Results got = run(s, in, attention_fwd, attention_bwd);
        const Results want = run(s, in, ref::attention_fwd, ref::attention_bwd);
        const auto where = ::testing::Message() << "T=" << T << " D=" << D << " Hkv=" << Hkv;
        EXPECT_TRUE(all_close(got.out, want.out, kRtol, kAtol)) << "out " << where;
        EXPECT_TRUE(all_close(got.lse, want.lse, kRtol, kAtol)) << "lse " << where;
        EXPECT_TRUE(all_close(got.dq, want.dq, kRtol, kAtol)) << "dq " << where;
        EXPECT_TRUE(all_close(got.dk, want.dk, kRtol, kAtol)) << "dk " << where;
        EXPECT_TRUE(all_close(got.dv, want.dv, kRtol, kAtol)) << "dv " << where;
      }
}

// With fewer (batch, kv head) pairs than threads the backward splits key blocks across tasks
// and sums private dQ parts; 4 threads and B*Hkv <= 2 force that path (3 key blocks at T=130).
TEST(Attention, BackwardWithKeyBlocksSplitAcrossTasks) {
  runtime::set_num_threads(4);
  for (int64_t Hkv : {1, 2}) {
    const AttentionShape s{1, 4, Hkv, 130, 16};
    const Inputs in(s, 60 + Hkv);
    const Results got = run(s, in, attention_fwd, attention_bwd);
    const Results want = run(s, in, ref::attention_fwd, ref::attention_bwd);
    EXPECT_TRUE(all_close(got.dq, want.dq, kRtol, kAtol)) << "dq Hkv=" << Hkv;
    EXPECT_TRUE(all_close(got.dk, want.dk, kRtol, kAtol)) << "dk Hkv=" << Hkv;
    EXPECT_TRUE(all_close(got.dv, want.dv, kRtol, kAtol)) << "dv Hkv=" << Hkv;
  }
  runtime::set_num_threads(runtime::default_num_threads());
}

TEST(Attention, ExplicitScaleIsUsed) {
  const AttentionShape s{1, 2, 1, 70, 16, 0.5f};
  const Inputs in(s, 77);
  const Results got = run(s, in, attention_fwd, attention_bwd);
  const Results want = run(s, in, ref::attention_fwd, ref::attention_bwd);
  EXPECT_TRUE(all_close(got.out, want.out, kRtol, kAtol));
  EXPECT_TRUE(all_close(got.dq, want.dq, kRtol, kAtol));
  EXPECT_TRUE(all_close(got.dk, want.dk, kRtol, kAtol));
}

// Proves the reference backward itself: L = sum(out * G) differentiated by central differences
// of the reference forward. The forward sums in double and rounds only its f32 outputs
// (~6e-8 relative), so with a step of 1e-2 the rounding noise in the quotient is ~1e-5 and the
// O(h^2) truncation ~1e-5; 5e-4 absolute + 2e-3 relative leaves room for both.
TEST(Attention, ReferenceBackwardMatchesFiniteDifferences) {
  const AttentionShape s{1, 2, 1, 5, 3};
  Inputs in(s, 5);
  const Results grads = run(s, in, ref::attention_fwd, ref::attention_bwd);
  auto loss = [&] {
    std::vector<float> out(in.q.size()), lse(s.H * s.T);
    ref::attention_fwd(in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(), s);
    double l = 0;
    for (size_t i = 0; i < out.size(); ++i) l += static_cast<double>(out[i]) * in.dout[i];
    return l;
  };
  auto check = [&](std::vector<float>& x, const std::vector<float>& analytic, const char* name) {
    std::vector<float> numeric(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const float x0 = x[i];
      x[i] = x0 + 1e-2f;
      const float up = x[i];
      const double l_up = loss();
      x[i] = x0 - 1e-2f;
      const float down = x[i];
      const double l_down = loss();
      x[i] = x0;
      numeric[i] = static_cast<float>((l_up - l_down) / (static_cast<double>(up) - down));
    }
    EXPECT_TRUE(all_close(analytic, numeric, 2e-3f, 5e-4f)) << name;
  };
  check(in.q, grads.dq, "dq");
  check(in.k, grads.dk, "dk");
  check(in.v, grads.dv, "dv");
}

TEST(Attention, RejectsIndivisibleHeads) {
  float x = 0;
  EXPECT_THROW(attention_fwd(&x, &x, &x, &x, &x, AttentionShape{1, 4, 3, 1, 1}), acc::Error);
  EXPECT_THROW(attention_bwd(&x, &x, &x, &x, &x, &x, &x, &x, &x, AttentionShape{1, 4, 0, 1, 1}),
               acc::Error);
}

// The tile product under attention, against the matmul reference on odd sizes and with A
// read transposed through its strides.
TEST(BlockGemm, MatchesReferenceIncludingTransposedA) {
  uint64_t seed = 900;
  for (int64_t M : {1, 5, 6, 13, 64})
    for (int64_t N : {1, 7, 16, 33})
      for (int64_t K : {1, 9, 64})
        for (bool trans_a : {false, true}) {
          const auto a = random_vector(M * K, seed++), b = random_vector(K * N, seed++);
          auto c = random_vector(M * N, seed++);
          auto want = c;
          MatmulShape s{M, N, K, trans_a, false};
          s.accumulate = true;
          ref::matmul(a.data(), b.data(), want.data(), s);
          detail::block_gemm(M, N, K, a.data(), trans_a ? 1 : K, trans_a ? M : 1, b.data(), N,
                             c.data(), N, true);
          EXPECT_TRUE(all_close(c, want, 1e-5f, 1e-5f)) << M << "x" << N << "x" << K;
        }
}

}  // namespace
}  // namespace acc::kernels
