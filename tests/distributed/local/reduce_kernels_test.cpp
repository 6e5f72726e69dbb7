#include "acc/distributed/reduce_kernels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "acc/kernels/convert.h"
#include "acc/util/error.h"
#include "support/test_support.h"

using namespace acc::dist::kernels;
using acc::DType;

namespace {

// Raw bytes of n random elements of `dtype`.
std::vector<char> random_bytes(DType dtype, int64_t n, uint64_t seed) {
  std::vector<char> out(n * acc::dtype_size(dtype));
  const auto f = acc::test::random_vector(n, seed);
  const auto k = acc::test::random_ints(n, seed, -1000000, 1000000);
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::f32: reinterpret_cast<float*>(out.data())[i] = f[i]; break;
      case DType::bf16: reinterpret_cast<acc::bfloat16*>(out.data())[i] = acc::kernels::to_bf16(f[i]); break;
      case DType::i32: reinterpret_cast<int32_t*>(out.data())[i] = k[i]; break;
      case DType::i64: reinterpret_cast<int64_t*>(out.data())[i] = int64_t{k[i]} << 20; break;
    }
  }
  return out;
}

}  // namespace

// Fast and reference kernels must agree bit for bit: both sum in the same order per element,
// so any difference is a bug in the vector path (sizes cover the 16-wide main loop and tails).
TEST(ReduceKernels, FastMatchesReferenceOnOddSizes) {
  for (DType dtype : {DType::f32, DType::bf16, DType::i32, DType::i64}) {
    const DType acc_t = accumulator_dtype(dtype);
    for (int64_t n : {0, 1, 7, 15, 16, 17, 33, 1000, 1023}) {
      const auto a = random_bytes(dtype, n, 1 + n), b = random_bytes(dtype, n, 2 + n);
      std::vector<char> acc_fast(n * acc::dtype_size(acc_t) + 1), acc_ref(acc_fast.size());
      load_accumulator(acc_fast.data(), a.data(), dtype, n);
      ref::load_accumulator(acc_ref.data(), a.data(), dtype, n);
      add_to_accumulator(acc_fast.data(), b.data(), dtype, n);
      ref::add_to_accumulator(acc_ref.data(), b.data(), dtype, n);
      EXPECT_EQ(std::memcmp(acc_fast.data(), acc_ref.data(), acc_fast.size()), 0)
          << acc::dtype_name(dtype) << " n=" << n;
      std::vector<char> sum_fast(acc_fast.size()), sum_ref(acc_fast.size());
      sum_to_accumulator(sum_fast.data(), a.data(), b.data(), dtype, n);
      ref::sum_to_accumulator(sum_ref.data(), a.data(), b.data(), dtype, n);
      EXPECT_EQ(std::memcmp(sum_fast.data(), sum_ref.data(), sum_fast.size()), 0)
          << "sum " << acc::dtype_name(dtype) << " n=" << n;
      EXPECT_EQ(std::memcmp(sum_fast.data(), acc_ref.data(), sum_fast.size()), 0)
          << "sum vs load+add " << acc::dtype_name(dtype) << " n=" << n;
      const float scale = acc::is_floating(dtype) ? 0.25f : 1.f;
      std::vector<char> out_fast(a.size() + 1), out_ref(a.size() + 1);
      store_accumulator(acc_fast.data(), out_fast.data(), dtype, n, scale);
      ref::store_accumulator(acc_ref.data(), out_ref.data(), dtype, n, scale);
      EXPECT_EQ(std::memcmp(out_fast.data(), out_ref.data(), out_fast.size()), 0)
          << acc::dtype_name(dtype) << " n=" << n;
    }
  }
}

TEST(ReduceKernels, Bf16SumsInF32) {
  // 1 + 3 * 2^-9 is 0.75 of a bf16 step above 1: summed in f32 and rounded once it becomes
  // 1 + 2^-7; rounding after every addition would leave 1.
  const acc::bfloat16 one = acc::kernels::to_bf16(1.f), small = acc::kernels::to_bf16(0x1p-9f);
  float acc_value = 0;
  load_accumulator(&acc_value, &one, DType::bf16, 1);
  for (int i = 0; i < 3; ++i) add_to_accumulator(&acc_value, &small, DType::bf16, 1);
  acc::bfloat16 out;
  store_accumulator(&acc_value, &out, DType::bf16, 1, 1.f);
  EXPECT_EQ(acc::kernels::to_f32(out), 1.f + 0x1p-7f);
}

TEST(ReduceKernels, IntegersWrapAndRejectScale) {
  int32_t acc_value = INT32_MAX;
  const int32_t one = 1;
  add_to_accumulator(&acc_value, &one, DType::i32, 1);
  EXPECT_EQ(acc_value, INT32_MIN);
  int32_t out;
  EXPECT_THROW(store_accumulator(&acc_value, &out, DType::i32, 1, 0.5f), acc::Error);
}

// copy_twice against two memcpys, with plain and streaming stores into the first destination:
// unaligned destinations and sizes around the 32-byte head and the 64-byte body;
// the bytes just outside both destinations must stay untouched.
TEST(ReduceKernels, CopyTwiceMatchesMemcpy) {
  const std::vector<char> src = random_bytes(DType::i32, 1024, 8);
  for (bool stream_a : {false, true}) {
    for (size_t offset : {0, 1, 33}) {
      for (size_t bytes : {0, 1, 31, 63, 64, 65, 97, 300, 4000}) {
        std::vector<char> a(4200, 'x'), b(4200, 'y'), want_a(4200, 'x'), want_b(4200, 'y');
        copy_twice(a.data() + offset, b.data() + 2 * offset + 5, src.data() + 3, bytes, stream_a);
        std::memcpy(want_a.data() + offset, src.data() + 3, bytes);
        std::memcpy(want_b.data() + 2 * offset + 5, src.data() + 3, bytes);
        EXPECT_EQ(a, want_a) << "stream_a " << stream_a << ", offset " << offset << ", bytes " << bytes;
        EXPECT_EQ(b, want_b) << "stream_a " << stream_a << ", offset " << offset << ", bytes " << bytes;
      }
    }
  }
}

// Streaming copy against memcpy: every destination alignment, sizes around the 128-byte body,
// and the bytes just outside the destination must stay untouched.
TEST(ReduceKernels, StreamingCopyMatchesMemcpy) {
  const std::vector<char> src = random_bytes(DType::i32, 1024, 7);
  for (size_t offset : {0, 1, 17, 31, 32, 45}) {
    for (size_t bytes : {0, 1, 31, 127, 128, 129, 300, 1000, 4000}) {
      std::vector<char> got(4200, 'x'), want(4200, 'x');
      copy_streaming(got.data() + offset, src.data() + 3, bytes);
      std::memcpy(want.data() + offset, src.data() + 3, bytes);
      EXPECT_EQ(got, want) << "offset " << offset << ", bytes " << bytes;
    }
  }
}
