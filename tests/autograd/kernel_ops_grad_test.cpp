// Kernel-backed ops: forward against simple formulas where cheap, backward against central
// finite differences (gradcheck.h explains the tolerances), and argument errors.
#include <gtest/gtest.h>

#include <cmath>

#include "acc/ops/activation.h"
#include "acc/ops/attention.h"
#include "acc/ops/conv.h"
#include "acc/ops/elementwise.h"
#include "acc/ops/embedding.h"
#include "acc/ops/loss.h"
#include "acc/ops/matmul.h"
#include "acc/ops/norm.h"
#include "acc/ops/shape.h"
#include "gradcheck.h"
#include "support/test_support.h"

namespace acc {
namespace {

using test::gradcheck;
using test::random_leaves;
using V = std::vector<Tensor>;

TEST(NormOps, LayerNormForwardAndGradients) {
  Tensor x = Tensor::from_vector({1, 2, 3, 4}, {1, 4});
  const auto y = ops::layer_norm(x, Tensor(), Tensor(), 0.0).to_vector();
  const float s = 1.f / std::sqrt(1.25f);  // population variance of 1..4 is 1.25
  EXPECT_TRUE(test::all_close(y, {-1.5f * s, -0.5f * s, 0.5f * s, 1.5f * s}, 1e-5f, 1e-6f));
  EXPECT_TRUE(gradcheck([](const V& v) { return ops::layer_norm(v[0], v[1], v[2]); },
                        random_leaves({{3, 7}, {7}, {7}}, 1)));
  EXPECT_TRUE(gradcheck([](const V& v) { return ops::layer_norm(v[0], Tensor(), Tensor()); },
                        random_leaves({{2, 5}}, 2)));
  EXPECT_THROW(ops::layer_norm(Tensor::zeros({2, 4}), Tensor::zeros({3}), Tensor()), Error);
}

TEST(NormOps, RmsNormGradients) {
  EXPECT_TRUE(gradcheck([](const V& v) { return ops::rms_norm(v[0], v[1]); },
                        random_leaves({{2, 3, 9}, {9}}, 3)));
}

TEST(ActivationOps, Gradients) {
  EXPECT_TRUE(gradcheck([](const V& v) { return ops::gelu(v[0]); }, random_leaves({{3, 11}}, 4)));
  EXPECT_TRUE(gradcheck([](const V& v) { return ops::silu(v[0]); }, random_leaves({{3, 11}}, 5)));
  EXPECT_TRUE(gradcheck([](const V& v) { return ops::swiglu(v[0], v[1]); },
                        random_leaves({{3, 11}, {3, 11}}, 6)));
  EXPECT_TRUE(gradcheck([](const V& v) { return ops::softmax(v[0]); }, random_leaves({{4, 9}}, 7)));
  EXPECT_THROW(ops::swiglu(Tensor::zeros({2}), Tensor::zeros({3})), Error);
}

TEST(ActivationOps, DropoutIsDeterministicScaledAndDifferentiable) {
  const int64_t n = 20000;
  Tensor x = Tensor::full({n}, 1.0);
  const auto a = ops::dropout(x, 0.25, 7, 3).to_vector();
  EXPECT_EQ(a, ops::dropout(x, 0.25, 7, 3).to_vector());
  EXPECT_NE(a, ops::dropout(x, 0.25, 7, 4).to_vector());
  int64_t dropped = 0;
  for (float v : a) {
    ASSERT_TRUE(v == 0.f || std::fabs(v - 1.f / 0.75f) < 1e-6f) << v;
    dropped += v == 0.f;
  }
  // Binomial(20000, 0.25): mean 5000, sd ~61; 5 sd either side.
  EXPECT_NEAR(static_cast<double>(dropped), 5000.0, 310.0);
  EXPECT_TRUE(gradcheck([](const V& v) { return ops::dropout(v[0], 0.5, 1, 2); }, random_leaves({{5, 7}}, 8)));
  EXPECT_THROW(ops::dropout(x, 1.0, 0, 0), Error);
}

TEST(EmbeddingOps, LookupAndTableGradient) {
  Tensor table = Tensor::from_vector({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor ids = Tensor::from_vector_i32({2, 0, 2}, {3});
  EXPECT_EQ(ops::embedding(table, ids).to_vector(), (std::vector<float>{20, 21, 0, 1, 20, 21}));
  Tensor ids2d = Tensor::from_vector_i64({1, 4, 4, 0, 2, 1}, {2, 3});
  EXPECT_EQ(ops::embedding(Tensor::zeros({5, 3}), ids2d).shape(), (Shape{2, 3, 3}));
  EXPECT_TRUE(gradcheck([&](const V& v) { return ops::embedding(v[0], ids2d); }, random_leaves({{5, 3}}, 9)));
  EXPECT_THROW(ops::embedding(table, Tensor::from_vector_i32({3}, {1})), Error);
}

TEST(LossOps, CrossEntropyValueIgnoreAndGradient) {
  // Uniform logits over V classes: loss log(V) on every counted row.
  Tensor logits = Tensor::zeros({3, 4});
  Tensor targets = Tensor::from_vector_i32({1, -100, 3}, {3});
  EXPECT_NEAR(ops::cross_entropy(logits, targets).item(), std::log(4.0), 1e-6);
  Tensor all_ignored = Tensor::from_vector_i32({-100, -100, -100}, {3});
  EXPECT_EQ(ops::cross_entropy(logits, all_ignored).item(), 0.f);
  Tensor leaf = Tensor::zeros({3, 4});
  leaf.set_requires_grad(true);
  // Zero gradients, not none: data-parallel ranks must all produce a gradient for every
  // parameter, even a rank whose rows are all ignored.
  ops::cross_entropy(leaf, all_ignored).backward();
  ASSERT_TRUE(leaf.grad().defined());
  EXPECT_EQ(leaf.grad().to_vector(), std::vector<float>(12, 0.f));
  EXPECT_TRUE(gradcheck([&](const V& v) { return ops::cross_entropy(v[0], targets); },
                        random_leaves({{3, 4}}, 10)));
  Tensor t2 = Tensor::from_vector_i32({0, 5, 2, 4, 1}, {5});
  EXPECT_TRUE(gradcheck([&](const V& v) { return ops::cross_entropy(v[0], t2); }, random_leaves({{5, 7}}, 11)));
  EXPECT_THROW(ops::cross_entropy(Tensor::zeros({3, 4}), Tensor::from_vector_i32({0, 1}, {2})), Error);
}

// A bf16 product rounds dlogits to bf16 in its backward anyway, so a loss that writes them in
// bf16 (grad_dtype) must give every upstream gradient bit for bit, ignored rows included.
TEST(LossOps, Bf16LogitGradientLeavesABf16HeadsGradientsUnchanged) {
  const Tensor targets = Tensor::from_vector_i32({3, -100, 36, 0, 17, 5}, {6});
  auto gradients = [&](DType grad_dtype) {
    V leaves = random_leaves({{6, 16}, {37, 16}}, 21);  // x, head weight
    const Tensor logits = ops::linear(leaves[0], ops::cast(leaves[1], DType::bf16));
    ops::cross_entropy(logits, targets, -100, grad_dtype).backward();
    return std::vector<std::vector<float>>{leaves[0].grad().to_vector(), leaves[1].grad().to_vector()};
  };
  EXPECT_EQ(gradients(DType::bf16), gradients(DType::f32));
  EXPECT_THROW(ops::cross_entropy(Tensor::zeros({6, 37}), targets, -100, DType::i32), Error);
}

// The fused head loss is the unfused one: with one chunk it runs the very same products (bit
// for bit, f32 and bf16), with chunks it sums the weight's gradient in pieces (a stated bound).
TEST(LossOps, LinearCrossEntropyIsLinearThenCrossEntropy) {
  const Tensor targets = Tensor::from_vector_i32({3, -100, 36, 0, 17, 5, 36, 1, 2, 9}, {10});
  using Grads = std::vector<std::vector<float>>;
  auto unfused = [&](DType dtype) {
    V leaves = random_leaves({{2, 5, 16}, {37, 16}}, 31);  // x [B, T, C], head weight
    const Tensor logits = ops::linear(leaves[0], ops::cast(leaves[1], dtype));
    Tensor loss = ops::cross_entropy(ops::reshape(logits, {10, 37}), targets, -100, dtype);
    loss.backward();
    return std::pair{loss.item(), Grads{leaves[0].grad().to_vector(), leaves[1].grad().to_vector()}};
  };
  auto fused = [&](DType dtype, int64_t chunk_rows) {
    V leaves = random_leaves({{2, 5, 16}, {37, 16}}, 31);
    Tensor loss = ops::linear_cross_entropy(leaves[0], ops::cast(leaves[1], dtype), targets, -100, chunk_rows);
    loss.backward();
    EXPECT_EQ(leaves[0].grad().shape(), (Shape{2, 5, 16}));
    return std::pair{loss.item(), Grads{leaves[0].grad().to_vector(), leaves[1].grad().to_vector()}};
  };
  for (DType dtype : {DType::f32, DType::bf16}) {
    const auto reference = unfused(dtype);
    EXPECT_EQ(fused(dtype, 10), reference) << dtype_name(dtype);
    for (int64_t chunk : {1, 3, 4}) {  // uneven last chunk, rows of one
      const auto [loss, grads] = fused(dtype, chunk);
      EXPECT_NEAR(loss, reference.first, 1e-6) << dtype_name(dtype) << " chunk " << chunk;
      for (size_t i = 0; i < grads.size(); ++i)
        EXPECT_TRUE(test::all_close(grads[i], reference.second[i], 1e-5f, 1e-7f))
            << dtype_name(dtype) << " chunk " << chunk << " input " << i;
    }
  }
  EXPECT_TRUE(gradcheck([&](const V& v) { return ops::linear_cross_entropy(v[0], v[1], targets, -100, 4); },
                        random_leaves({{10, 6}, {37, 6}}, 32)));
}

TEST(LossOps, LinearCrossEntropyScalesByTheUpstreamGradientAndRecordsOnlyWhenNeeded) {
  const Tensor targets = Tensor::from_vector_i32({1, 0, 2}, {3});
  V once = random_leaves({{3, 4}, {5, 4}}, 33), thrice = random_leaves({{3, 4}, {5, 4}}, 33);
  ops::linear_cross_entropy(once[0], once[1], targets, -100, 2).backward();
  ops::scale(ops::linear_cross_entropy(thrice[0], thrice[1], targets, -100, 2), 3.0).backward();
  for (size_t i = 0; i < 2; ++i) {
    std::vector<float> expected = once[i].grad().to_vector();
    for (float& e : expected) e *= 3.f;
    EXPECT_TRUE(test::all_close(thrice[i].grad().to_vector(), expected, 1e-6f, 1e-7f)) << i;
  }
  Tensor plain = Tensor::zeros({3, 4}), weight = Tensor::zeros({5, 4});
  EXPECT_FALSE(ops::linear_cross_entropy(plain, weight, targets).grad_fn());  // nothing to train
  EXPECT_NEAR(ops::linear_cross_entropy(plain, weight, targets).item(), std::log(5.0), 1e-6);
  V leaves = random_leaves({{3, 4}, {5, 4}}, 34);
  const Tensor all_ignored = Tensor::from_vector_i32({-100, -100, -100}, {3});
  Tensor loss = ops::linear_cross_entropy(leaves[0], leaves[1], all_ignored);
  EXPECT_EQ(loss.item(), 0.f);
  loss.backward();  // as cross_entropy: zero gradients
  ASSERT_TRUE(leaves[0].grad().defined() && leaves[1].grad().defined());
  EXPECT_EQ(leaves[0].grad().to_vector(), std::vector<float>(12, 0.f));
  EXPECT_EQ(leaves[1].grad().to_vector(), std::vector<float>(20, 0.f));
  EXPECT_THROW(ops::linear_cross_entropy(plain, Tensor::zeros({5, 3}), targets), Error);        // C differs
  EXPECT_THROW(ops::linear_cross_entropy(plain, weight, Tensor::zeros({3})), Error);  // f32 targets
  EXPECT_THROW(ops::linear_cross_entropy(plain, weight, Tensor::from_vector_i32({1, 7, 0}, {3})), Error);
}

TEST(AttentionOps, CausalAttentionGqaGradients) {
  // B=2, H=4 query heads sharing Hkv=2 kv heads, odd T and D.
  EXPECT_TRUE(gradcheck([](const V& v) { return ops::causal_attention(v[0], v[1], v[2]); },
                        random_leaves({{2, 4, 5, 3}, {2, 2, 5, 3}, {2, 2, 5, 3}}, 12)));
  EXPECT_THROW(ops::causal_attention(Tensor::zeros({1, 3, 4, 2}), Tensor::zeros({1, 2, 4, 2}),
                                     Tensor::zeros({1, 2, 4, 2})),
               Error);
}

TEST(AttentionOps, FirstPositionAttendsOnlyToItself) {
  auto in = random_leaves({{1, 1, 3, 4}, {1, 1, 3, 4}, {1, 1, 3, 4}}, 13);
  const auto out = ops::causal_attention(in[0], in[1], in[2]).to_vector();
  const auto v = in[2].to_vector();
  for (int d = 0; d < 4; ++d) EXPECT_NEAR(out[static_cast<size_t>(d)], v[static_cast<size_t>(d)], 1e-6);
}

TEST(AttentionOps, RopeGradientsAndPositionZeroIsIdentity) {
  EXPECT_TRUE(gradcheck([](const V& v) { return ops::rope(v[0], 10000.0, 3); }, random_leaves({{1, 2, 3, 6}}, 14)));
  auto x = random_leaves({{1, 1, 1, 4}}, 15);
  EXPECT_TRUE(test::all_close(ops::rope(x[0]).to_vector(), x[0].to_vector(), 0.f, 1e-7f));
  EXPECT_THROW(ops::rope(Tensor::zeros({1, 1, 2, 3})), Error);
}

}  // namespace
}  // namespace acc

namespace acc {
namespace {

TEST(ConvOps, Conv2dGradientsWithStridePadAndOddSizes) {
  for (int64_t stride : {1, 2}) {
    SCOPED_TRACE(testing::Message() << "stride " << stride);
    EXPECT_TRUE(test::gradcheck([stride](const test::V& v) { return ops::conv2d(v[0], v[1], v[2], stride, 1); },
                                test::random_leaves({{2, 3, 5, 5}, {4, 3, 3, 3}, {4}}, 20)));
  }
  EXPECT_TRUE(test::gradcheck([](const test::V& v) { return ops::conv2d(v[0], v[1], Tensor()); },
                              test::random_leaves({{1, 2, 4, 3}, {3, 2, 2, 2}}, 21)));
  EXPECT_THROW(ops::conv2d(Tensor::zeros({1, 2, 4, 4}), Tensor::zeros({3, 1, 2, 2}), Tensor()), Error);
}

TEST(ConvOps, MaxPoolPicksWindowMaximaAndRoutesGradient) {
  Tensor x = Tensor::from_vector({1, 5, 2, 0, 3, 4, 8, 1, 0, 0, 0, 0, 9, 0, 0, 7}, {1, 1, 4, 4});
  EXPECT_EQ(ops::max_pool2d(x).to_vector(), (std::vector<float>{5, 8, 9, 7}));
  // Distinct values (no ties) so the finite difference does not cross a switch of argmax.
  auto in = test::random_leaves({{2, 3, 5, 5}}, 22);
  EXPECT_TRUE(test::gradcheck([](const test::V& v) { return ops::max_pool2d(v[0]); }, in,
                              {.eps = 1e-3, .rtol = 2e-2, .atol = 2e-3}));
  EXPECT_THROW(ops::max_pool2d(Tensor::zeros({1, 1, 1, 1})), Error);
}

}  // namespace
}  // namespace acc

namespace acc {
namespace {

TEST(MixedPrecision, Bf16InputsAreConvertedAndGetBf16Gradients) {
  // The bf16 leaf holds exactly representable values, so its f32 twin computes the same
  // forward; the bf16 gradient must be the f32 gradient rounded to bf16.
  auto f32_leaves = test::random_leaves({{3, 8}, {8}}, 30);
  Tensor x16 = f32_leaves[0].detach().to(DType::bf16);
  x16.set_requires_grad(true);
  Tensor x32 = x16.detach().to(DType::f32);
  x32.set_requires_grad(true);
  Tensor gamma = f32_leaves[1];
  Tensor y16 = ops::gelu(ops::layer_norm(x16, gamma, Tensor()));
  Tensor y32 = ops::gelu(ops::layer_norm(x32, gamma, Tensor()));
  EXPECT_EQ(y16.dtype(), DType::f32);
  EXPECT_EQ(y16.to_vector(), y32.to_vector());
  const Tensor seed = Tensor::from_vector(test::random_vector(24, 31), {3, 8});
  y16.backward(seed);
  y32.backward(seed);
  ASSERT_EQ(x16.grad().dtype(), DType::bf16);
  EXPECT_EQ(x16.grad().to_vector(), x32.grad().to(DType::bf16).to_vector());
}

}  // namespace
}  // namespace acc
