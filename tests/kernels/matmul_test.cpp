#include "acc/kernels/matmul.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "acc/kernels/convert.h"
#include "acc/memory/resident.h"
#include "acc/util/error.h"
#include "support/test_support.h"

namespace acc::kernels {
namespace {

using test::all_close;
using test::random_vector;

struct Dims {
  int64_t M, N, K;
};
const Dims kShapes[] = {{1, 1, 1}, {7, 13, 5}, {65, 33, 17}, {128, 256, 64}};

std::vector<bfloat16> to_bf16_vector(const std::vector<float>& v) {
  std::vector<bfloat16> out(v.size());
  ref::f32_to_bf16(v.data(), out.data(), static_cast<int64_t>(v.size()));
  return out;
}

std::vector<float> to_f32_vector(const std::vector<bfloat16>& v) {
  std::vector<float> out(v.size());
  ref::bf16_to_f32(v.data(), out.data(), static_cast<int64_t>(v.size()));
  return out;
}

// f32 sums of K products of N(0,1) values carry ~sqrt(K) * 2^-24 relative error against the
// double reference; 1e-5 absolute + relative leaves a wide margin for K <= 256 while still
// catching any wrong index (which gives O(1) errors).
constexpr float kF32Tol = 1e-5f;

TEST(Matmul, F32AllTranspositionsMatchReference) {
  uint64_t seed = 1;
  for (const Dims& d : kShapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        MatmulShape s{d.M, d.N, d.K, ta, tb};
        const auto a = random_vector(d.M * d.K, seed++), b = random_vector(d.K * d.N, seed++);
        std::vector<float> c(d.M * d.N, NAN), want(d.M * d.N);
        matmul(a.data(), b.data(), c.data(), s);
        ref::matmul(a.data(), b.data(), want.data(), s);
        EXPECT_TRUE(all_close(c, want, kF32Tol, kF32Tol))
            << d.M << "x" << d.N << "x" << d.K << " trans_a=" << ta << " trans_b=" << tb;
      }
}

TEST(Matmul, AccumulateAndBias) {
  uint64_t seed = 100;
  for (const Dims& d : kShapes)
    for (bool acc : {false, true}) {
      MatmulShape s{d.M, d.N, d.K, false, true};
      s.accumulate = acc;
      const auto a = random_vector(d.M * d.K, seed++), b = random_vector(d.K * d.N, seed++);
      const auto bias = random_vector(d.N, seed++);
      auto c = random_vector(d.M * d.N, seed++);
      auto want = c;
      matmul(a.data(), b.data(), c.data(), s, bias.data());
      ref::matmul(a.data(), b.data(), want.data(), s, bias.data());
      EXPECT_TRUE(all_close(c, want, kF32Tol, kF32Tol))
          << d.M << "x" << d.N << "x" << d.K << " accumulate=" << acc;
    }
}

TEST(Matmul, Bf16InputsMatchReferenceOnRoundedValues) {
  uint64_t seed = 200;
  for (const Dims& d : kShapes)
    for (bool ta : {false, true}) {
      MatmulShape s{d.M, d.N, d.K, ta, !ta, DType::bf16};
      const auto a = to_bf16_vector(random_vector(d.M * d.K, seed++));
      const auto b = to_bf16_vector(random_vector(d.K * d.N, seed++));
      std::vector<float> c(d.M * d.N), want(d.M * d.N);
      matmul(a.data(), b.data(), c.data(), s);
      ref::matmul(a.data(), b.data(), want.data(), s);
      // Same bf16 inputs on both sides and f32 accumulation: only summation order differs.
      EXPECT_TRUE(all_close(c, want, 1e-3f, 1e-4f)) << d.M << "x" << d.N << "x" << d.K;
    }
}

// Large bf16 operands in every layout: on AMX, kernels::matmul copies a transposed A or a
// K x N B of this size into the other layout first (matmul.cpp); bias and accumulate ride
// along. 256 entries spread over C are checked against sums in double of the same bf16
// values (a whole reference product of this size takes seconds).
TEST(Matmul, Bf16LargeOperandsInEveryLayoutMatchReference) {
  const Dims d{1024, 1040, 1032};
  uint64_t seed = 250;
  const auto bias = random_vector(d.N, seed++);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      MatmulShape s{d.M, d.N, d.K, ta, tb, DType::bf16};
      s.accumulate = ta == tb;
      const auto a = to_f32_vector(to_bf16_vector(random_vector(d.M * d.K, seed++)));
      const auto b = to_f32_vector(to_bf16_vector(random_vector(d.K * d.N, seed++)));
      const auto before = random_vector(d.M * d.N, seed++);
      auto c = before;
      matmul(to_bf16_vector(a).data(), to_bf16_vector(b).data(), c.data(), s, bias.data());
      std::vector<float> got, want;
      for (int64_t n = 0; n < 256; ++n) {
        const int64_t i = (n * 397) % d.M, j = (n * 211 + 7) % d.N;
        double sum = bias[j] + (s.accumulate ? before[i * d.N + j] : 0.0);
        for (int64_t k = 0; k < d.K; ++k)
          sum += static_cast<double>(a[ta ? k * d.M + i : i * d.K + k]) * b[tb ? j * d.K + k : k * d.N + j];
        got.push_back(c[i * d.N + j]);
        want.push_back(static_cast<float>(sum));
      }
      EXPECT_TRUE(all_close(got, want, 1e-4f, 1e-4f)) << "trans_a=" << ta << " trans_b=" << tb;
    }
}

TEST(Matmul, Bf16OutputIsRoundedProduct) {
  uint64_t seed = 300;
  for (const Dims& d : kShapes)
    for (DType ab : {DType::f32, DType::bf16}) {
      MatmulShape s{d.M, d.N, d.K, false, false, ab, DType::bf16};
      const auto a32 = random_vector(d.M * d.K, seed++), b32 = random_vector(d.K * d.N, seed++);
      const auto a16 = to_bf16_vector(a32), b16 = to_bf16_vector(b32);
      const void* a = ab == DType::bf16 ? static_cast<const void*>(a16.data()) : a32.data();
      const void* b = ab == DType::bf16 ? static_cast<const void*>(b16.data()) : b32.data();
      std::vector<bfloat16> c(d.M * d.N), want(d.M * d.N);
      matmul(a, b, c.data(), s);
      ref::matmul(a, b, want.data(), s);
      // Rounding to bf16 (8 significant bits) may land one ulp (2^-8 relative) apart.
      EXPECT_TRUE(all_close(to_f32_vector(c), to_f32_vector(want), 1.f / 128, 1e-4f))
          << d.M << "x" << d.N << "x" << d.K << " ab=" << dtype_name(ab);
    }
}

void expect_batched_matches(int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c,
                            const MatmulShape& s, uint64_t seed) {
  const auto a = random_vector(batch * stride_a, seed),
             b = random_vector(batch * stride_b, seed + 1);
  std::vector<float> c(batch * stride_c, 0.f), want(batch * stride_c, 0.f);
  batched_matmul(batch, a.data(), stride_a, b.data(), stride_b, c.data(), stride_c, s);
  for (int64_t i = 0; i < batch; ++i)
    ref::matmul(a.data() + i * stride_a, b.data() + i * stride_b, want.data() + i * stride_c, s);
  EXPECT_TRUE(all_close(c, want, kF32Tol, kF32Tol))
      << "strides " << stride_a << "," << stride_b << "," << stride_c;
}

TEST(Matmul, BatchedDenseAndStrided) {
  for (bool tb : {false, true}) {
    const MatmulShape s{7, 13, 5, false, tb};
    expect_batched_matches(3, 7 * 5, 5 * 13, 7 * 13, s, 400);  // dense: one 3-D primitive
    expect_batched_matches(3, 7 * 5 + 3, 5 * 13 + 1, 7 * 13 + 2, s, 410);  // padded: loop
  }
}

TEST(Matmul, EmptyInnerDimensionGivesBias) {
  MatmulShape s{3, 4, 0};
  const std::vector<float> bias{1, 2, 3, 4};
  std::vector<float> c(12, NAN);
  matmul(nullptr, nullptr, c.data(), s, bias.data());
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(c[i], bias[i % 4]);
}

TEST(Matmul, ConcurrentCallsShareCachedPrimitive) {
  const MatmulShape s{65, 33, 17};
  const auto a = random_vector(65 * 17, 500), b = random_vector(17 * 33, 501);
  std::vector<float> want(65 * 33);
  ref::matmul(a.data(), b.data(), want.data(), s);
  std::vector<std::vector<float>> results(8, std::vector<float>(65 * 33));
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back([&] { matmul(a.data(), b.data(), r.data(), s); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_TRUE(all_close(r, want, kF32Tol, kF32Tol));
}

TEST(Matmul, RejectsBadShapesAndTypes) {
  float x = 0;
  MatmulShape s{1, 1, 1};
  s.accumulate = true;
  s.c_type = DType::bf16;
  EXPECT_THROW(matmul(&x, &x, &x, s), acc::Error);
  EXPECT_THROW(matmul(&x, &x, &x, MatmulShape{-1, 1, 1}), acc::Error);
  EXPECT_THROW(matmul(&x, &x, &x, MatmulShape{1, 1, 1, false, false, DType::i32}), acc::Error);
}

// The first bf16 product of a process (oneDNN builds its kernel and starts its threads then)
// with only `margin` bytes of private memory left to it; exits 0 when it ran, 3 when it failed
// with an acc::Error saying "out of memory" (printed), 4 on any other acc::Error.
[[noreturn]] void first_product_with_margin(size_t margin) {
  const MatmulShape s{96, 80, 64, false, false, DType::bf16, DType::f32};
  const auto a = to_bf16_vector(random_vector(96 * 64, 502)), b = to_bf16_vector(random_vector(64 * 80, 503));
  std::vector<float> c(96 * 80);
  const int64_t used = memory::data_bytes();  // in a death test's child: a failure exits (6)
  if (used <= 0) std::_Exit(6);
  const rlim_t limit = static_cast<rlim_t>(used) + margin;
  const rlimit r{limit, limit};
  if (setrlimit(RLIMIT_DATA, &r) != 0) std::_Exit(5);
  try {
    matmul(a.data(), b.data(), c.data(), s);
  } catch (const acc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::_Exit(std::string(e.what()).find("out of memory") != std::string::npos ? 3 : 4);
  }
  std::_Exit(0);
}

// A process at its memory limit (ulimit -d) gets an error saying so from its products, never a
// crash: oneDNN segfaults when the memory to build a kernel's code is refused, and libgomp ends
// the process when it cannot start the OpenMP team (kernels/detail/onednn_headroom.h). Swept
// over the memory left, from none (finely, where builds fail) to far more than a team of one
// thread per core needs, each in a process of its own (gtest re-runs this binary for each).
TEST(Matmul, AMemoryLimitGivesAnErrorNotACrash) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator ends the process itself when a mapping is refused";
#endif
  const std::string style = GTEST_FLAG_GET(death_test_style);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int ran = 0, refused = 0;
  auto outcome = [&](int status) {
    if (!WIFEXITED(status)) return false;  // a signal: the crash this test is about
    ran += WEXITSTATUS(status) == 0;
    refused += WEXITSTATUS(status) == 3;
    return WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3;
  };
  std::vector<size_t> margins;
  for (size_t kib = 0; kib <= 4096; kib += 256) margins.push_back(kib << 10);
  for (size_t mib : {5, 6, 8, 10, 12, 13, 14, 16, 20, 24, 32, 64, 256, 1024, 4096, 16384})
    margins.push_back(mib << 20);
  for (const size_t margin : margins)
    EXPECT_EXIT(first_product_with_margin(margin), outcome, "") << "with " << margin << " bytes left";
  EXPECT_GT(ran, 0) << "no margin was enough: the sweep does not reach the working case";
  EXPECT_GT(refused, 0) << "no margin was too small: the sweep does not test the limit";
  GTEST_FLAG_SET(death_test_style, style);
}

}  // namespace
}  // namespace acc::kernels
