// Forward values, finite-difference gradients and shape errors of the arithmetic, shape,
// reduction and matmul ops.
#include <gtest/gtest.h>

#include "acc/ops/elementwise.h"
#include "acc/ops/matmul.h"
#include "acc/ops/reduce.h"
#include "acc/ops/shape.h"
#include "gradcheck.h"
#include "support/test_support.h"

namespace acc {
namespace {

using test::gradcheck;
using test::random_leaves;
using V = std::vector<Tensor>;

// Expects op() to throw an acc::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F op, std::initializer_list<std::string> parts) {
  try {
    op();
    ADD_FAILURE() << "expected acc::Error";
  } catch (const Error& e) {
    for (const auto& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' missing from: " << e.what();
  }
}

TEST(ElementwiseOps, ForwardBroadcastsOverLeadingDims) {
  Tensor a = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector({10, 20, 30}, {3});
  EXPECT_EQ(ops::add(a, b).to_vector(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(ops::sub(a, b).to_vector(), (std::vector<float>{-9, -18, -27, -6, -15, -24}));
  EXPECT_EQ(ops::mul(a, b).to_vector(), (std::vector<float>{10, 40, 90, 40, 100, 180}));
  EXPECT_EQ(ops::div(b, b).to_vector(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(ops::add(a, 1.0).to_vector(), (std::vector<float>{2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(ops::neg(b).to_vector(), (std::vector<float>{-10, -20, -30}));
  EXPECT_EQ(ops::div(b, 10.0).to_vector(), (std::vector<float>{1, 2, 3}));
}

TEST(ElementwiseOps, LargeOddShapesMatchPlainLoop) {
  // Odd sizes exercise the row-segment splitting of the parallel loop.
  const Shape as{37, 1031}, bs{1031};
  Tensor a = Tensor::from_vector(test::random_vector(shape_numel(as), 1), as);
  Tensor b = Tensor::from_vector(test::random_vector(shape_numel(bs), 2), bs);
  const auto out = ops::mul(a, b).to_vector();
  const auto va = a.to_vector(), vb = b.to_vector();
  std::vector<float> expect(va.size());
  for (size_t i = 0; i < va.size(); ++i) expect[i] = va[i] * vb[i % vb.size()];
  EXPECT_EQ(out, expect);
}

TEST(ElementwiseOps, BroadcastErrorsNameOpAndShapes) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({2});
  expect_error([&] { ops::add(a, b); }, {"add", "[2]", "[2, 3]", "suffix"});
  expect_error([&] { ops::mul(b, a); }, {"mul", "[2, 3]", "[2]"});
  expect_error([&] { ops::div(a, 0.0); }, {"div", "0"});
}

TEST(ElementwiseOps, Gradients) {
  for (const Shape& bs : {Shape{3, 5}, Shape{5}, Shape{}}) {
    const Shape as{3, 5};
    EXPECT_TRUE(gradcheck([](const V& x) { return ops::add(x[0], x[1]); }, random_leaves({as, bs}, 1)));
    EXPECT_TRUE(gradcheck([](const V& x) { return ops::sub(x[0], x[1]); }, random_leaves({as, bs}, 2)));
    EXPECT_TRUE(gradcheck([](const V& x) { return ops::mul(x[0], x[1]); }, random_leaves({as, bs}, 3)));
    auto div_inputs = random_leaves({as, bs}, 4);
    div_inputs[1] = Tensor::from_vector(ops::add(div_inputs[1], 3.0).to_vector(), bs);  // away from 0
    div_inputs[1].set_requires_grad(true);
    EXPECT_TRUE(gradcheck([](const V& x) { return ops::div(x[0], x[1]); }, div_inputs));
  }
  EXPECT_TRUE(gradcheck([](const V& x) { return ops::add(x[0], 2.5); }, random_leaves({{7}}, 5)));
  EXPECT_TRUE(gradcheck([](const V& x) { return ops::scale(x[0], -1.5); }, random_leaves({{7}}, 6)));
  EXPECT_TRUE(gradcheck([](const V& x) { return ops::neg(x[0]); }, random_leaves({{7}}, 7)));
}

TEST(ShapeOps, PermuteMatchesIndexFormula) {
  const int64_t B = 2, T = 3, H = 5, D = 7;
  Tensor x = Tensor::from_vector(test::random_vector(B * T * H * D, 3), {B, T, H, D});
  Tensor y = ops::permute(x, {0, 2, 1, 3});
  ASSERT_EQ(y.shape(), (Shape{B, H, T, D}));
  const auto vx = x.to_vector(), vy = y.to_vector();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d)
          ASSERT_EQ(vy[static_cast<size_t>(((b * H + h) * T + t) * D + d)],
                    vx[static_cast<size_t>(((b * T + t) * H + h) * D + d)]);
  Tensor m = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(ops::transpose(m).to_vector(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(ops::transpose(m).shape(), (Shape{3, 2}));
}

TEST(ShapeOps, TiledTransposeOfOddShapesMatchesIndexFormula) {
  // 37 x 70 spans partial 32-wide tiles in both directions; bf16 exercises the 2-byte path.
  for (DType dtype : {DType::f32, DType::bf16}) {
    const int64_t B = 3, R = 37, C = 70;
    Tensor x = Tensor::from_vector(test::random_vector(B * R * C, 9), {B, R, C}, dtype);
    const auto vx = x.to_vector(), vy = ops::transpose(x).to_vector();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c)
          ASSERT_EQ(vy[static_cast<size_t>((b * C + c) * R + r)], vx[static_cast<size_t>((b * R + r) * C + c)]);
    // A permutation that moves the last dimension without being a last-two swap.
    Tensor p = ops::permute(x, {2, 0, 1});
    const auto vp = p.to_vector();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c)
          ASSERT_EQ(vp[static_cast<size_t>((c * B + b) * R + r)], vx[static_cast<size_t>((b * R + r) * C + c)]);
  }
}

TEST(ShapeOps, NarrowSplitConcatRoundTrip) {
  Tensor x = Tensor::from_vector(test::random_vector(3 * 7 * 5, 4), {3, 7, 5});
  auto parts = ops::split(x, {2, 4, 1}, 1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1].shape(), (Shape{3, 4, 5}));
  EXPECT_EQ(ops::concat(parts, 1).to_vector(), x.to_vector());
  EXPECT_EQ(ops::narrow(x, -1, 1, 2).to_vector()[0], x.to_vector()[1]);
}

TEST(ShapeOps, ErrorsNameShapes) {
  Tensor x = Tensor::zeros({3, 4});
  expect_error([&] { ops::narrow(x, 1, 3, 2); }, {"narrow", "[3, 5)", "[3, 4]"});
  expect_error([&] { ops::split(x, {1, 1}, 0); }, {"split", "[1, 1]", "f32[3, 4]"});
  expect_error([&] { ops::concat({x, Tensor::zeros({2, 5})}, 0); }, {"concat", "f32[2, 5]"});
  expect_error([&] { ops::permute(x, {0, 0}); }, {"permute", "[0, 0]"});
  expect_error([&] { ops::reshape(x, {5, -1}); }, {"view", "[5, -1]"});
  expect_error([&] { ops::transpose(Tensor::zeros({4})); }, {"transpose", "f32[4]"});
}

TEST(ShapeOps, Gradients) {
  EXPECT_TRUE(gradcheck([](const V& x) { return ops::reshape(x[0], {5, -1}); }, random_leaves({{3, 5}}, 1)));
  EXPECT_TRUE(gradcheck([](const V& x) { return ops::permute(x[0], {0, 2, 1, 3}); },
                        random_leaves({{2, 3, 2, 3}}, 2)));
  EXPECT_TRUE(gradcheck([](const V& x) { return ops::permute(x[0], {2, 0, 1}); }, random_leaves({{2, 3, 4}}, 3)));
  EXPECT_TRUE(gradcheck([](const V& x) { return ops::transpose(x[0]); }, random_leaves({{2, 3, 5}}, 4)));
  EXPECT_TRUE(gradcheck([](const V& x) { return ops::narrow(x[0], 1, 1, 3); }, random_leaves({{3, 5, 2}}, 5)));
  EXPECT_TRUE(gradcheck(
      [](const V& x) {
        auto p = ops::split(x[0], {1, 3}, 0);
        return ops::mul(p[1], ops::sum(p[0]));  // both pieces feed the output
      },
      random_leaves({{4, 3}}, 6)));
  EXPECT_TRUE(gradcheck([](const V& x) { return ops::concat({x[0], x[1]}, 1); },
                        random_leaves({{2, 3}, {2, 5}}, 7)));
  EXPECT_TRUE(gradcheck([](const V& x) { return ops::cast(x[0], DType::f32); }, random_leaves({{4}}, 8)));
}

TEST(ReduceOps, ValuesAndGradients) {
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(ops::sum(x).item(), 21.f);
  EXPECT_EQ(ops::mean(x).item(), 3.5f);
  EXPECT_EQ(ops::sum_last(x).to_vector(), (std::vector<float>{6, 15}));
  EXPECT_EQ(ops::mean_last(x).to_vector(), (std::vector<float>{2, 5}));
  EXPECT_EQ(ops::sum(x).shape(), Shape{});
  EXPECT_TRUE(gradcheck([](const V& v) { return ops::sum(v[0]); }, random_leaves({{3, 7}}, 1)));
  EXPECT_TRUE(gradcheck([](const V& v) { return ops::mean(v[0]); }, random_leaves({{3, 7}}, 2)));
  EXPECT_TRUE(gradcheck([](const V& v) { return ops::sum_last(v[0]); }, random_leaves({{2, 3, 7}}, 3)));
  EXPECT_TRUE(gradcheck([](const V& v) { return ops::mean_last(v[0]); }, random_leaves({{3, 7}}, 4)));
}

TEST(MatmulOps, AllTranspositionsMatchReferenceAndGradcheck) {
  const int64_t M = 3, K = 5, N = 7;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(testing::Message() << "trans_a " << ta << " trans_b " << tb);
      const Shape as = ta ? Shape{K, M} : Shape{M, K}, bs = tb ? Shape{N, K} : Shape{K, N};
      auto in = random_leaves({as, bs}, 10);
      const auto a = in[0].to_vector(), b = in[1].to_vector();
      const auto c = ops::matmul(in[0], in[1], ta, tb).to_vector();
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += static_cast<double>(a[static_cast<size_t>(ta ? k * M + m : m * K + k)]) *
                   b[static_cast<size_t>(tb ? n * K + k : k * N + n)];
          EXPECT_NEAR(c[static_cast<size_t>(m * N + n)], acc, 1e-5);
        }
      EXPECT_TRUE(gradcheck([=](const V& x) { return ops::matmul(x[0], x[1], ta, tb); }, in));
    }
}

TEST(MatmulOps, BatchedGradcheck) {
  EXPECT_TRUE(gradcheck([](const V& x) { return ops::matmul(x[0], x[1], false, true); },
                        random_leaves({{2, 3, 5}, {2, 4, 5}}, 11)));
}

TEST(MatmulOps, LinearGradcheckWithAndWithoutBias) {
  EXPECT_TRUE(gradcheck([](const V& x) { return ops::linear(x[0], x[1], x[2]); },
                        random_leaves({{2, 3, 5}, {7, 5}, {7}}, 12)));
  EXPECT_TRUE(gradcheck([](const V& x) { return ops::linear(x[0], x[1]); },
                        random_leaves({{3, 5}, {4, 5}}, 13)));
}

TEST(MatmulOps, ShapeErrorsNameOperands) {
  expect_error([] { ops::matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})); },
               {"matmul", "f32[2, 3]", "f32[4, 5]"});
  expect_error([] { ops::linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})); },
               {"linear", "f32[2, 3]", "f32[4, 5]"});
  expect_error([] { ops::linear(Tensor::zeros({2, 5}), Tensor::zeros({4, 5}), Tensor::zeros({3})); },
               {"linear", "bias", "f32[3]"});
}

TEST(MatmulOps, Bf16WeightGivesBf16GradientCloseToF32) {
  // bf16 keeps 8 mantissa bits: inputs are rounded to ~0.4% relative error, so the products
  // and gradients agree with the f32 run to a few 1e-2 absolute at these magnitudes.
  auto in = random_leaves({{4, 6}, {5, 6}}, 14);
  Tensor w16 = in[1].detach().to(DType::bf16);
  w16.set_requires_grad(true);
  Tensor x16 = in[0].detach().to(DType::f32);
  x16.set_requires_grad(true);
  Tensor y32 = ops::linear(in[0], in[1]);
  Tensor y16 = ops::linear(x16, w16);
  EXPECT_EQ(y16.dtype(), DType::f32);
  EXPECT_TRUE(test::all_close(y16.to_vector(), y32.to_vector(), 2e-2f, 5e-2f));
  ops::sum(y32).backward();
  ops::sum(y16).backward();
  ASSERT_EQ(w16.grad().dtype(), DType::bf16);
  EXPECT_TRUE(test::all_close(w16.grad().to_vector(), in[1].grad().to_vector(), 2e-2f, 5e-2f));
  EXPECT_TRUE(test::all_close(x16.grad().to_vector(), in[0].grad().to_vector(), 2e-2f, 5e-2f));
}

}  // namespace
}  // namespace acc
