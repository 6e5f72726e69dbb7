// Every collective, on every dtype, against a reference each rank computes locally: rank r's
// contribution is a deterministic function of (r, index), so every rank can compute every
// other rank's input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <numeric>

#include "acc/distributed/process_group.h"
#include "acc/distributed/staging_copy.h"
#include "acc/kernels/convert.h"
#include "acc/memory/allocator.h"
#include "acc/runtime/init.h"
#include "segments.h"
#include "support/test_support.h"

using acc::DType;
using acc::Tensor;
using acc::dist::ReduceOp;

namespace {

const DType kDTypes[] = {DType::f32, DType::bf16, DType::i32, DType::i64};

// Rank r's element i: small integers for integer types, values of mixed sign and magnitude
// (exact in bf16) for floating types.
double contribution(DType dtype, int rank, int64_t i) {
  const int64_t k = (rank * 7919 + i * 104729) % 201 - 100;
  if (dtype == DType::i64) return static_cast<double>(k) * 4294967296.0;  // beyond 32 bits
  // |k * (1 + rank % 2)| <= 200 < 2^8: exact in bf16's 8 significant bits.
  if (is_floating(dtype)) return static_cast<double>(k) * 0.0078125 * (1 + rank % 2);
  return static_cast<double>(k);
}

Tensor make_input(DType dtype, int rank, int64_t offset, int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = contribution(dtype, rank, offset + i);
  Tensor t = Tensor::empty({n}, dtype);
  switch (dtype) {
    case DType::i64:
      for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = static_cast<int64_t>(v[i]);
      break;
    default:
      t.copy_(Tensor::from_vector(std::vector<float>(v.begin(), v.end()), {n}));
  }
  return t;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> out(t.numel());
  if (t.dtype() == DType::i64) {
    for (int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<double>(t.data<int64_t>()[i]);
  } else {
    const auto f = t.to_vector();
    out.assign(f.begin(), f.end());
  }
  return out;
}

// The exact reduction of all ranks' element i, converted as the result dtype stores it.
double expected_reduction(DType dtype, int size, int64_t i, ReduceOp op) {
  double sum = 0;
  for (int r = 0; r < size; ++r) sum += contribution(dtype, r, i);
  if (op == ReduceOp::avg) sum /= size;
  if (dtype == DType::bf16) return acc::kernels::to_f32(acc::kernels::to_bf16(static_cast<float>(sum)));
  if (dtype == DType::f32) return static_cast<float>(sum);
  return sum;
}

// Contributions are multiples of 2^-7 of modest size, so f32 sums are exact and the bf16
// result is the exactly rounded sum (f32 accumulation, one rounding): results must be equal.
void expect_reduced(const Tensor& got, DType dtype, int size, int64_t offset, ReduceOp op,
                    const std::string& what) {
  const auto v = values(got);
  int64_t bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double want = expected_reduction(dtype, size, offset + i, op);
    if (v[i] != want && bad++ < 3)
      ADD_FAILURE() << what << " " << dtype_name(dtype) << " element " << offset + i << ": got "
                    << v[i] << " want " << want;
  }
}

std::vector<int64_t> uneven_counts(int size, int64_t base) {
  std::vector<int64_t> counts(size);
  for (int r = 0; r < size; ++r) counts[r] = base + 3 * r + (r == 1 ? -base : 0);  // rank 1: 0
  return counts;
}

}  // namespace

TEST(Collectives, AllGatherEveryDtypeAndSize) {
  auto& g = acc::world();
  for (DType dtype : kDTypes) {
    for (int64_t n : {1, 7, 1000, 65537}) {
      const Tensor in = make_input(dtype, g.rank(), 0, n);
      Tensor out = Tensor::zeros({n * g.size()}, dtype);
      g.all_gather(in, out);
      const auto got = values(out);
      for (int r = 0; r < g.size(); ++r)
        EXPECT_EQ(std::vector<double>(got.begin() + r * n, got.begin() + (r + 1) * n),
                  values(make_input(dtype, r, 0, n)))
            << dtype_name(dtype) << " n=" << n << " chunk of rank " << r;
    }
  }
}

TEST(Collectives, AllGatherUneven) {
  auto& g = acc::world();
  for (DType dtype : kDTypes) {
    const auto counts = uneven_counts(g.size(), 1001);
    const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    const Tensor in = make_input(dtype, g.rank(), 0, counts[g.rank()]);
    Tensor out = Tensor::zeros({total}, dtype);
    g.all_gather_v(in, out, counts);
    const auto got = values(out);
    int64_t offset = 0;
    for (int r = 0; r < g.size(); ++r) {
      EXPECT_EQ(std::vector<double>(got.begin() + offset, got.begin() + offset + counts[r]),
                values(make_input(dtype, r, 0, counts[r])))
          << dtype_name(dtype) << " chunk of rank " << r;
      offset += counts[r];
    }
  }
}

TEST(Collectives, ReduceScatterSumAvg) {
  auto& g = acc::world();
  for (DType dtype : kDTypes) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      if (op == ReduceOp::avg && !is_floating(dtype)) continue;
      for (int64_t n : {1, 13, 4099}) {
        // Element j of the full input is contribution(rank, j): chunk r starts at r * n.
        const Tensor in = make_input(dtype, g.rank(), 0, n * g.size());
        Tensor out = Tensor::zeros({n}, dtype);
        g.reduce_scatter(in, out, op);
        expect_reduced(out, dtype, g.size(), g.rank() * n, op, "reduce_scatter");
      }
    }
  }
}

TEST(Collectives, ReduceScatterUneven) {
  auto& g = acc::world();
  // 70001 elements span several transfer segments (128 KB) while rank 1's 3 fit in one, so
  // the two ends of a link see chunks of different segment counts.
  for (int64_t base : {517, 70001}) {
    for (DType dtype : kDTypes) {
      const auto counts = uneven_counts(g.size(), base);
      const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
      const int64_t offset =
          std::accumulate(counts.begin(), counts.begin() + g.rank(), int64_t{0});
      const Tensor in = make_input(dtype, g.rank(), 0, total);
      Tensor out = Tensor::zeros({counts[g.rank()]}, dtype);
      g.reduce_scatter_v(in, out, counts, ReduceOp::sum);
      expect_reduced(out, dtype, g.size(), offset, ReduceOp::sum, "reduce_scatter_v");
    }
  }
}

TEST(Collectives, AllReduceEveryDtypeOddSizes) {
  auto& g = acc::world();
  for (DType dtype : kDTypes) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      if (op == ReduceOp::avg && !is_floating(dtype)) continue;
      for (int64_t n : {1, 3, 1001, 100003}) {  // fewer elements than ranks, uneven chunks
        Tensor t = make_input(dtype, g.rank(), 0, n);
        g.all_reduce(t, op);
        expect_reduced(t, dtype, g.size(), 0, op, "all_reduce");
      }
    }
  }
}

TEST(Collectives, Bf16AccumulatesInF32) {
  // Rank 0 gives 1, every other rank 2^-9 (a quarter of a bf16 step at 1). Summed in f32 and
  // rounded once: 1 + (p-1) 2^-9, rounded. Rounding after each addition would stay at 1.
  auto& g = acc::world();
  Tensor t = Tensor::full({33}, g.rank() == 0 ? 1.0 : 0x1p-9, DType::bf16);
  g.all_reduce(t);
  const float want = acc::kernels::to_f32(acc::kernels::to_bf16(1.f + (g.size() - 1) * 0x1p-9f));
  for (float v : t.to_vector()) EXPECT_EQ(v, want);
  if (g.size() >= 3) {
    EXPECT_GT(want, 1.f);  // the case that tells the two apart
  }
}

TEST(Collectives, BroadcastFromEveryRoot) {
  auto& g = acc::world();
  for (DType dtype : kDTypes) {
    for (int root = 0; root < g.size(); ++root) {
      Tensor t = make_input(dtype, g.rank(), 0, 777);
      g.broadcast(t, root);
      EXPECT_EQ(values(t), values(make_input(dtype, root, 0, 777))) << dtype_name(dtype);
    }
  }
}

TEST(Collectives, BarrierAndEmptyTensors) {
  auto& g = acc::world();
  g.barrier();
  Tensor empty = Tensor::zeros({0});
  g.all_reduce(empty);
  Tensor out = Tensor::zeros({0});
  g.all_gather(empty, out);
  g.barrier();
}

// Buffers of several shared-memory steps (staging buffers of 256 KiB-1 MiB) and an all_gather output
// past the 16 MiB from which it streams its stores; uneven chunks give ranks different step
// counts (rank 1 has none), and every collective still has to line up step by step.
TEST(Collectives, LargeBuffersSpanManySteps) {
  auto& g = acc::world();
  const int p = g.size();
  const int64_t n = (int64_t{17} << 20) / 4 / p + 5;  // f32 elements per rank: 17 MiB output
  {
    const Tensor in = make_input(DType::f32, g.rank(), 0, n);
    Tensor out = Tensor::zeros({n * p});
    g.all_gather(in, out);
    const auto got = values(out);
    for (int r = 0; r < p; ++r)
      EXPECT_TRUE(std::vector<double>(got.begin() + r * n, got.begin() + (r + 1) * n) ==
                  values(make_input(DType::f32, r, 0, n)))
          << "all_gather chunk of rank " << r;
  }
  for (DType dtype : {DType::f32, DType::bf16}) {
    const auto counts = uneven_counts(p, 300001);
    const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    const int64_t offset = std::accumulate(counts.begin(), counts.begin() + g.rank(), int64_t{0});
    Tensor out = Tensor::zeros({counts[g.rank()]}, dtype);
    g.reduce_scatter_v(make_input(dtype, g.rank(), 0, total), out, counts, ReduceOp::avg);
    expect_reduced(out, dtype, p, offset, ReduceOp::avg, "reduce_scatter_v (large)");

    Tensor t = make_input(dtype, g.rank(), 0, 1000003);
    g.all_reduce(t);
    expect_reduced(t, dtype, p, 0, ReduceOp::sum, "all_reduce (large)");

    Tensor b = make_input(dtype, g.rank(), 0, 300001);
    g.broadcast(b, p - 1);
    EXPECT_TRUE(values(b) == values(make_input(dtype, p - 1, 0, 300001))) << "broadcast (large)";
  }
}

// The world's shared-memory segments are counted as communication memory, exactly: the
// collectives' channel (segments.h) and the point-to-point mailbox. Measured right after init,
// before collectives take scratch buffers (which count there too).
TEST(Collectives, SharedMemorySegmentsAreCounted) {
  auto off = [](const char* name) { return std::getenv(name) && std::string(std::getenv(name)) == "0"; };
  const int64_t p = acc::world().size();
  EXPECT_EQ(g_communication_bytes_after_init,
            off("ACC_SHM") ? 0 : channel_segment_bytes(p) + (off("ACC_SHM_P2P") ? 0 : mailbox_segment_bytes(p)));
}

TEST(Collectives, ArgumentErrorsAreLocalAndClear) {
  auto& g = acc::world();
  acc::test::expect_contains(acc::test::error_of([&] { g.all_gather(Tensor::zeros({3}), Tensor::zeros({3})); }),
                             {"all_gather: input f32[3] and output f32[3]"});
}
