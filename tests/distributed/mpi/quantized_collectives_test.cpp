// Reductions over int8 and int4 wires (dist::ReduceWire, ZeRO++'s qgZ) against a reference every rank
// computes locally: each rank's input is a known function of (rank, index), so the reference
// quantizes every peer's chunk with the plain kernels and sums in the schedule's order (own
// chunk first, then the peers at rank - 1, rank - 2, ...): the results must be equal to it
// bit for bit, within the quantization bound of the exact sum, and not the exact sum itself.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "acc/distributed/process_group.h"
#include "acc/distributed/traffic.h"
#include "acc/kernels/quantize.h"
#include "acc/runtime/init.h"
#include "support/test_support.h"

using acc::Tensor;
using acc::dist::ReduceOp;
using acc::dist::ReduceWire;
namespace kernels = acc::kernels;

namespace {

constexpr int64_t kBlock = 64;

// Rank r's element i: mixed signs and magnitudes, a different largest value in every block.
float input_of(int rank, int64_t i) {
  return std::sin(0.37f * static_cast<float>(i) + static_cast<float>(rank)) * (1.f + static_cast<float>((i / kBlock) % 5));
}

std::vector<float> inputs_of(int rank, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = input_of(rank, i);
  return v;
}

// The largest quantized value: x within half of max |x| / level of its round trip.
float level_of(int bits) { return bits == 8 ? 127.f : 7.f; }

// What x looks like after crossing the wire.
std::vector<float> round_trip(const float* x, int64_t n, int bits) {
  std::vector<float> scales(kernels::quant_blocks(n, kBlock)), back(n);
  if (bits == 4) {
    std::vector<uint8_t> packed((n + 1) / 2);
    kernels::ref::quantize_int4(x, n, kBlock, packed.data(), scales.data());
    kernels::ref::dequantize_int4(packed.data(), scales.data(), n, kBlock, back.data());
    return back;
  }
  std::vector<int8_t> q(n);
  kernels::ref::quantize_int8(x, n, kBlock, q.data(), scales.data());
  kernels::ref::dequantize_int8(q.data(), scales.data(), n, kBlock, back.data());
  return back;
}

// Rank `owner`'s reduced chunk [offset, offset + n) as the schedule sums it.
std::vector<float> reference_chunk(int owner, int size, int64_t offset, int64_t n, int64_t total, ReduceOp op,
                                   int bits) {
  const std::vector<float> own = inputs_of(owner, total);
  std::vector<float> acc(own.begin() + offset, own.begin() + offset + n);
  for (int step = 1; step < size; ++step) {
    const int from = ((owner - step) % size + size) % size;
    const std::vector<float> theirs = inputs_of(from, total);
    const std::vector<float> arrived = round_trip(theirs.data() + offset, n, bits);
    for (int64_t i = 0; i < n; ++i) acc[i] += arrived[i];
  }
  if (op == ReduceOp::avg)
    for (float& x : acc) x *= 1.f / static_cast<float>(size);
  return acc;
}

// Within half a block's scale of the exact sum per peer (|x| <= 5 everywhere), and not exact.
void expect_within_quantization(const std::vector<float>& got, int size, int64_t offset, ReduceOp op, int bits) {
  const double per = op == ReduceOp::avg ? 1.0 / size : 1.0;
  const double bound = ((size - 1) * 0.5 * 5.0 / level_of(bits) * 1.01 + 1e-5) * per;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const int64_t at = offset + static_cast<int64_t>(i);
    double exact = 0;
    for (int r = 0; r < size; ++r) exact += input_of(r, at);
    worst = std::max(worst, std::fabs(got[i] - exact * per));
    ASSERT_LE(std::fabs(got[i] - exact * per), bound) << "element " << at;
  }
  if (size > 1 && got.size() > 1) {
    EXPECT_GT(worst, 0.0) << "nothing was quantized";
  }
}

}  // namespace

TEST(QuantizedCollectives, ReduceScatterSumsDequantizedPeerChunks) {
  auto& g = acc::world();
  const int p = g.size();
  for (const int bits : {8, 4})
  for (const ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
    for (const int64_t base : {int64_t{1}, int64_t{100}, int64_t{5000}}) {
      std::vector<int64_t> counts(p);
      for (int r = 0; r < p; ++r) counts[r] = base + 7 * r + (r == 1 ? -base : 0);  // rank 1: none
      const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
      const int64_t offset = std::accumulate(counts.begin(), counts.begin() + g.rank(), int64_t{0});
      const std::vector<float> mine = inputs_of(g.rank(), total);
      Tensor in = Tensor::from_vector(mine, {total}), out = Tensor::zeros({counts[g.rank()]});
      g.reduce_scatter_v(in, out, counts, op, ReduceWire{kBlock, bits});
      const std::vector<float> got = out.to_vector();
      EXPECT_EQ(got, reference_chunk(g.rank(), p, offset, counts[g.rank()], total, op, bits))
          << "int" << bits << " base " << base << " op " << acc::dist::reduce_op_name(op);
      expect_within_quantization(got, p, offset, op, bits);
    }
  }
}

TEST(QuantizedCollectives, AllReduceLeavesEveryRankTheSameValues) {
  auto& g = acc::world();
  const int p = g.size();
  for (const int bits : {8, 4})
  for (const int64_t n : {int64_t{3}, int64_t{1001}, int64_t{20000}}) {
    const float level = level_of(bits);
    Tensor t = Tensor::from_vector(inputs_of(g.rank(), n), {n});
    g.all_reduce(t, ReduceOp::avg, ReduceWire{kBlock, bits});
    const std::vector<float> got = t.to_vector();
    std::vector<float> want;
    for (int owner = 0, offset = 0; owner < p; ++owner) {
      const int64_t count = n / p + (owner < n % p);
      std::vector<float> chunk = reference_chunk(owner, p, offset, count, n, ReduceOp::avg, bits);
      if (p > 1) chunk = round_trip(chunk.data(), count, bits);  // the gathered values, the owner's too
      want.insert(want.end(), chunk.begin(), chunk.end());
      offset += static_cast<int>(count);
    }
    EXPECT_EQ(got, want) << "int" << bits << " n " << n;
    // Twice quantized: the reduced chunk's own round trip adds half its block's scale.
    const float largest = *std::max_element(got.begin(), got.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); });
    for (int64_t i = 0; i < n; ++i) {
      double exact = 0;
      for (int r = 0; r < p; ++r) exact += input_of(r, i);
      exact /= p;
      ASSERT_LE(std::fabs(got[i] - exact), ((p - 1) * 0.5 * 5.0 / level / p + 0.5 * std::fabs(largest) / level) * 1.01 + 1e-5)
          << "int" << bits << " element " << i;
    }
  }
}

// The traffic counted is the quantized message's: a quarter (int8) or an eighth (int4) of
// f32's and a little.
TEST(QuantizedCollectives, CountAQuarterOrAnEighthOfF32Bytes) {
  auto& g = acc::world();
  if (g.size() == 1) GTEST_SKIP() << "one rank sends nothing";
  const int64_t n = 1 << 16;
  for (const int bits : {8, 4}) {
    uint64_t bytes[2] = {0, 0};
    for (const bool quantized : {false, true}) {
      Tensor t = Tensor::from_vector(inputs_of(g.rank(), n), {n});
      acc::dist::reset_traffic();
      g.all_reduce(t, ReduceOp::sum, ReduceWire{quantized ? kBlock : 0, bits});
      bytes[quantized] = acc::dist::traffic().bytes_of(acc::dist::TrafficKind::all_reduce);
    }
    const double ratio = static_cast<double>(bytes[1]) / static_cast<double>(bytes[0]);
    EXPECT_NEAR(ratio, (bits / 8.0 + 4.0 / kBlock) / 4, 0.001) << "int" << bits;
  }
}

TEST(QuantizedCollectives, OnlyF32GoesOverAQuantizedWire) {
  auto& g = acc::world();
  Tensor t = Tensor::zeros({8}, acc::DType::bf16);
  acc::test::expect_contains(acc::test::error_of([&] { g.all_reduce(t, ReduceOp::sum, ReduceWire{kBlock}); }),
                             {"all_reduce: a quantized wire quantizes f32, got bf16[8]"});
}

TEST(QuantizedCollectives, AnInt4WireNeedsAnEvenBlock) {
  auto& g = acc::world();
  Tensor t = Tensor::zeros({8});
  acc::test::expect_contains(acc::test::error_of([&] { g.all_reduce(t, ReduceOp::sum, ReduceWire{63, 4}); }),
                             {"all_reduce: a quantized wire has 8 bits, or 4 with an even block; got 4 bits, block 63"});
}
