#include <gtest/gtest.h>

#include <cmath>

#include "acc/kernels/convert.h"
#include "acc/tensor/random.h"
#include "acc/tensor/tensor.h"

namespace acc {
namespace {

TEST(Tensor, CreationAndMetadata) {
  Tensor t = Tensor::full({2, 3}, 1.5);
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_EQ(t.describe(), "f32[2, 3]");
  for (float v : t.to_vector()) EXPECT_EQ(v, 1.5f);
  EXPECT_FALSE(Tensor().defined());
}

TEST(Tensor, ViewsShareStorageAtOffsets) {
  Tensor flat = Tensor::from_vector({0, 1, 2, 3, 4, 5, 6, 7}, {8});
  Tensor w = flat.slice_flat(2, {2, 2});
  EXPECT_EQ(w.to_vector(), (std::vector<float>{2, 3, 4, 5}));
  w.fill_(9);
  EXPECT_EQ(flat.to_vector(), (std::vector<float>{0, 1, 9, 9, 9, 9, 6, 7}));
  Tensor rows = flat.view({4, 2}).narrow(1, 2);
  EXPECT_EQ(rows.to_vector(), (std::vector<float>{9, 9, 9, 9}));
  EXPECT_EQ(flat.view({-1, 4}).shape(), (Shape{2, 4}));
}

TEST(Tensor, BadShapesAreClearErrors) {
  Tensor t = Tensor::zeros({2, 3});
  try {
    t.view({4, 2});
    FAIL() << "expected acc::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32[2, 3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.slice_flat(4, {3}), Error);
  EXPECT_THROW(t.data<bfloat16>(), Error);
  EXPECT_THROW(Tensor::from_vector({1, 2, 3}, {2, 2}), Error);
}

TEST(Tensor, ConvertsBetweenDtypes) {
  Tensor f = Tensor::from_vector({1.0f, -2.5f, 3.14159f, 1e-3f}, {4});
  Tensor b = f.to(DType::bf16);
  EXPECT_EQ(b.dtype(), DType::bf16);
  std::vector<float> back = b.to(DType::f32).to_vector();
  std::vector<float> orig = f.to_vector();
  for (size_t i = 0; i < back.size(); ++i) EXPECT_NEAR(back[i], orig[i], std::fabs(orig[i]) / 128);
  EXPECT_EQ(Tensor::from_vector({7.9f}, {1}).to(DType::i32).to_vector_i64()[0], 7);
}

TEST(Bf16, RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between bf16 neighbours 1 and 1+2^-7: ties go to even (1).
  EXPECT_EQ(kernels::to_f32(kernels::to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up to even.
  EXPECT_EQ(kernels::to_f32(kernels::to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(kernels::to_f32(kernels::to_bf16(NAN))));
  EXPECT_TRUE(std::isinf(kernels::to_f32(kernels::to_bf16(INFINITY))));
}

TEST(Random, SliceOfStreamEqualsSliceOfWhole) {
  Tensor whole = Tensor::randn({1000}, 42, "transformer.h.0.attn.c_attn.weight", 0.f, 0.02f);
  const uint64_t key = random::stream_key(42, "transformer.h.0.attn.c_attn.weight");
  std::vector<float> w = whole.to_vector();
  for (const int64_t begin : {500, 501}) {  // a slice may begin at any element
    std::vector<float> part(300);
    random::fill_normal(part.data(), begin, 300, key, 0.f, 0.02f);
    for (int i = 0; i < 300; ++i) EXPECT_EQ(part[i], w[begin + i]) << begin;
  }
  // Different names give different streams.
  Tensor other = Tensor::randn({1000}, 42, "transformer.h.1.attn.c_attn.weight", 0.f, 0.02f);
  EXPECT_NE(other.to_vector()[0], w[0]);
}

// Every element fill_normal writes is random::normal's for that element, wherever the slice
// begins (a faster fill must keep this).
TEST(Random, FillEqualsTheElementwiseStream) {
  const uint64_t key = random::stream_key(3, "pairs");
  const std::vector<std::pair<int64_t, int64_t>> slices{{0, 1}, {1, 1}, {1, 2}, {7, 100}, {500, 301}};
  for (const auto& [begin, count] : slices) {
    std::vector<float> got(static_cast<size_t>(count));
    random::fill_normal(got.data(), begin, count, key, 1.f, 2.f);
    for (int64_t i = 0; i < count; ++i)
      EXPECT_EQ(got[static_cast<size_t>(i)], 1.f + 2.f * random::normal(key, static_cast<uint64_t>(begin + i)))
          << "element " << begin + i;
  }
}

TEST(Random, NormalHasUnitMoments) {
  Tensor t = Tensor::randn({200000}, 7, "moments");
  const std::vector<float> v = t.to_vector();
  double sum = 0, sq = 0, fourth = 0, pairs = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = v[i];
    sum += x, sq += x * x, fourth += x * x * x * x;
    if (i % 2 == 0) pairs += x * v[i + 1];  // neighbours uncorrelated
  }
  const double n = static_cast<double>(v.size()), mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.02);
  EXPECT_NEAR(fourth / n, 3.0, 0.1);       // a normal's kurtosis
  EXPECT_NEAR(pairs / (n / 2), 0.0, 0.02);
}

}  // namespace
}  // namespace acc
