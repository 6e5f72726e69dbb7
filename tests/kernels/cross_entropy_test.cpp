#include "acc/kernels/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "acc/kernels/convert.h"
#include "acc/util/error.h"
#include "support/test_support.h"

namespace acc::kernels {
namespace {

using test::all_close;
using test::random_ints;
using test::random_vector;

constexpr int32_t kIgnore = -100;

// Targets in [0, V) with every third row ignored.
std::vector<int32_t> targets_with_ignored(int64_t N, int64_t V, uint64_t seed) {
  auto t = random_ints(N, seed, 0, static_cast<int32_t>(V));
  for (int64_t i = 0; i < N; i += 3) t[i] = kIgnore;
  return t;
}

struct Case {
  int64_t N, V;
  float scale;  // logit spread; large values test the max subtraction
};

// f32 exp-sums over up to 50257 terms against double: the relative error of the sum is
// ~sqrt(V/8) * 6e-8 <= 5e-6, i.e. an absolute error of that size on lse and loss (lse ~ 14 at
// most here); gradients inherit it as a relative error. Tolerances keep a 2-4x margin.
constexpr float kLossRtol = 1e-5f, kLossAtol = 2e-5f;
constexpr float kGradRtol = 2e-5f, kGradAtol = 1e-9f;

TEST(CrossEntropy, ForwardAndBackwardMatchReference) {
  uint64_t seed = 1;
  for (const Case c : {Case{1, 1, 1.f}, Case{37, 7, 1.f}, Case{33, 1000, 3.f}, Case{5, 50257, 2.f},
                       Case{9, 131, 300.f}}) {
    const auto logits = random_vector(c.N * c.V, seed++, c.scale);
    const auto targets = targets_with_ignored(c.N, c.V, seed++);
    const auto dloss = random_vector(c.N, seed++);
    std::vector<float> loss(c.N, NAN), lse(c.N, NAN), want_loss(c.N), want_lse(c.N);
    const int64_t kept =
        cross_entropy_fwd(logits.data(), targets.data(), loss.data(), lse.data(), c.N, c.V);
    EXPECT_EQ(kept, ref::cross_entropy_fwd(logits.data(), targets.data(), want_loss.data(),
                                           want_lse.data(), c.N, c.V));
    EXPECT_EQ(kept, c.N - (c.N + 2) / 3);
    EXPECT_TRUE(all_close(loss, want_loss, kLossRtol, kLossAtol)) << "N=" << c.N << " V=" << c.V;
    EXPECT_TRUE(all_close(lse, want_lse, kLossRtol, kLossAtol)) << "N=" << c.N << " V=" << c.V;

    std::vector<float> grad(c.N * c.V, NAN), want(c.N * c.V);
    cross_entropy_bwd(logits.data(), targets.data(), lse.data(), dloss.data(), grad.data(), c.N,
                      c.V);
    ref::cross_entropy_bwd(logits.data(), targets.data(), lse.data(), dloss.data(), want.data(),
                           c.N, c.V);
    EXPECT_TRUE(all_close(grad, want, kGradRtol, kGradAtol)) << "N=" << c.N << " V=" << c.V;
    for (int64_t i = 0; i < c.N; i += 3) EXPECT_EQ(loss[i], 0.f) << "ignored row " << i;

    // In place: the gradient overwrites the logits and must come out identical.
    auto inplace = logits;
    cross_entropy_bwd(inplace.data(), targets.data(), lse.data(), dloss.data(), inplace.data(), c.N,
                      c.V);
    EXPECT_EQ(inplace, grad) << "in-place N=" << c.N << " V=" << c.V;

    // In bf16: exactly the f32 gradient rounded, ignored rows included.
    std::vector<bfloat16> half(c.N * c.V, bfloat16{0x7fc0}), rounded(c.N * c.V);
    cross_entropy_bwd(logits.data(), targets.data(), lse.data(), dloss.data(), half.data(), c.N, c.V);
    ref::f32_to_bf16(grad.data(), rounded.data(), c.N * c.V);
    int64_t differ = 0;
    for (int64_t i = 0; i < c.N * c.V; ++i) differ += half[i].bits != rounded[i].bits;
    EXPECT_EQ(differ, 0) << "bf16 gradient elements that are not the rounded f32 ones, N=" << c.N
                         << " V=" << c.V;
  }
}

// A vocabulary split into column pieces (as ranks hold it): the pieces' log-sum-exps combine
// to the whole row's, and each piece's gradient is that piece of the whole row's gradient,
// the target's one-hot term only in the piece that holds it; a piece may be empty.
TEST(CrossEntropy, ColumnPiecesMatchTheWholeRow) {
  const int64_t N = 11, V = 1003;
  const auto logits = random_vector(N * V, 60, 3.f);
  const auto targets = targets_with_ignored(N, V, 61);
  const auto dloss = random_vector(N, 62);
  std::vector<float> loss(N), lse(N), whole(N * V);
  ref::cross_entropy_fwd(logits.data(), targets.data(), loss.data(), lse.data(), N, V);
  ref::cross_entropy_bwd(logits.data(), targets.data(), lse.data(), dloss.data(), whole.data(), N, V);
  const std::vector<int64_t> bounds{0, 400, 400, 777, V};  // pieces [0,400) [400,400) [400,777) [777,V)
  std::vector<float> combined(N, 0.f);  // sum of exp(piece lse - whole lse): 1 when they combine
  for (size_t p = 0; p + 1 < bounds.size(); ++p) {
    const int64_t first = bounds[p], width = bounds[p + 1] - first;
    std::vector<float> piece(N * width);
    for (int64_t i = 0; i < N; ++i)
      std::copy_n(logits.begin() + i * V + first, width, piece.begin() + i * width);
    std::vector<float> piece_lse(N);
    logsumexp_rows(piece.data(), piece_lse.data(), N, width);
    for (int64_t i = 0; i < N; ++i) combined[i] += std::exp(piece_lse[i] - lse[i]);
    std::vector<float> grad(N * width, NAN), want(N * width);
    std::vector<bfloat16> half(N * width), rounded(N * width);
    cross_entropy_bwd_columns(piece.data(), targets.data(), first, lse.data(), dloss.data(),
                              grad.data(), N, width);
    cross_entropy_bwd_columns(piece.data(), targets.data(), first, lse.data(), dloss.data(),
                              half.data(), N, width);
    for (int64_t i = 0; i < N; ++i)
      std::copy_n(whole.begin() + i * V + first, width, want.begin() + i * width);
    EXPECT_TRUE(all_close(grad, want, kGradRtol, kGradAtol)) << "piece from " << first;
    ref::f32_to_bf16(grad.data(), rounded.data(), N * width);
    for (int64_t k = 0; k < N * width; ++k)
      ASSERT_EQ(half[k].bits, rounded[k].bits) << "piece from " << first << ", element " << k;
  }
  for (int64_t i = 0; i < N; ++i) EXPECT_NEAR(combined[i], 1.f, 2e-5f) << "row " << i;
}

TEST(CrossEntropy, CustomIgnoreIndexZeroesRow) {
  const int64_t N = 4, V = 10;
  const auto logits = random_vector(N * V, 40);
  const std::vector<int32_t> targets{5, 2, 5, 9};
  const std::vector<float> dloss(N, 1.f);
  std::vector<float> loss(N), lse(N), grad(N * V);
  EXPECT_EQ(cross_entropy_fwd(logits.data(), targets.data(), loss.data(), lse.data(), N, V, 5), 2);
  cross_entropy_bwd(logits.data(), targets.data(), lse.data(), dloss.data(), grad.data(), N, V, 5);
  EXPECT_EQ(loss[0], 0.f);
  EXPECT_GT(loss[1], 0.f);
  for (int64_t j = 0; j < V; ++j) EXPECT_EQ(grad[2 * V + j], 0.f);
}

TEST(CrossEntropy, OutOfRangeTargetThrows) {
  const int64_t N = 3, V = 4;
  const std::vector<float> logits(N * V, 0.f), dloss(N, 1.f);
  std::vector<float> loss(N), lse(N), grad(N * V);
  for (int32_t bad : {4, -1, 1000}) {
    const std::vector<int32_t> targets{0, bad, kIgnore};
    EXPECT_THROW(cross_entropy_fwd(logits.data(), targets.data(), loss.data(), lse.data(), N, V),
                 acc::Error);
    EXPECT_THROW(cross_entropy_bwd(logits.data(), targets.data(), lse.data(), dloss.data(),
                                   grad.data(), N, V),
                 acc::Error);
  }
  try {
    const std::vector<int32_t> targets{0, 7, 1};
    cross_entropy_fwd(logits.data(), targets.data(), loss.data(), lse.data(), N, V);
    ADD_FAILURE() << "target 7 with V=4 was accepted";
  } catch (const acc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 1 is 7"), std::string::npos) << e.what();
  }
}

// Proves the reference backward: L = sum_i dloss_i * loss_i differentiated by central
// differences of the reference forward. Losses are computed in double and rounded once to f32
// (~5e-7 absolute at loss ~3), so with a step of 1e-2 the noise is ~5e-5 and the O(h^2)
// truncation ~1e-5; 2e-4 absolute + 1e-3 relative bounds both.
TEST(CrossEntropy, ReferenceBackwardMatchesFiniteDifferences) {
  const int64_t N = 4, V = 6;
  auto logits = random_vector(N * V, 50, 2.f);
  const std::vector<int32_t> targets{3, kIgnore, 0, 5};
  const auto dloss = random_vector(N, 51);
  std::vector<float> loss(N), lse(N), grad(N * V);
  ref::cross_entropy_fwd(logits.data(), targets.data(), loss.data(), lse.data(), N, V);
  ref::cross_entropy_bwd(logits.data(), targets.data(), lse.data(), dloss.data(), grad.data(), N,
                         V);
  auto objective = [&] {
    ref::cross_entropy_fwd(logits.data(), targets.data(), loss.data(), lse.data(), N, V);
    double l = 0;
    for (int64_t i = 0; i < N; ++i) l += static_cast<double>(dloss[i]) * loss[i];
    return l;
  };
  std::vector<float> numeric(N * V);
  for (int64_t i = 0; i < N * V; ++i) {
    const float x0 = logits[i];
    const float up = logits[i] = x0 + 1e-2f;
    const double l_up = objective();
    const float down = logits[i] = x0 - 1e-2f;
    const double l_down = objective();
    logits[i] = x0;
    numeric[i] = static_cast<float>((l_up - l_down) / (static_cast<double>(up) - down));
  }
  EXPECT_TRUE(all_close(grad, numeric, 1e-3f, 2e-4f));
}

}  // namespace
}  // namespace acc::kernels
