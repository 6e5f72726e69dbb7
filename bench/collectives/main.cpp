// bench_collectives: algorithm bandwidth (bytes of the full buffer / time) of acc's all_gather,
// reduce_scatter and all_reduce over the mpi plugin, next to memcpy bandwidth (bytes copied /
// time) and OpenMPI's own MPI_Allgather / MPI_Reduce_scatter_block / MPI_Allreduce, all in the
// same run. Run: mpirun -np 2 build/bin/bench_collectives [json path [min bytes [max bytes]]]
// The ceiling a collective on one node can reach is a cross-core copy: each rank writes its part
// of a shared buffer (as backward or the optimizer writes a shard just before its collective),
// then every rank copies the whole buffer out, the peers' parts crossing cores. That is a
// single-copy all_gather of freshly written data; its bandwidth is measured here too ("xcore").
// The built-ins run from the main thread while acc's comm thread is idle (mpi_beside_acc.h).
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <functional>
#include <initializer_list>
#include <new>
#include <string>
#include <vector>

#include "acc/runtime/init.h"
#include "collectives/mpi_beside_acc.h"
#include "acc/tensor/tensor.h"
#include "support/measure.h"

namespace {

using Clock = std::chrono::steady_clock;

// Seconds per call: a warm-up call, then the best of 5 batches of enough calls for ~1 GB of
// traffic (at least 1). A batch's time is the slowest rank's, since a collective is as fast as
// its last rank; the best batch is kept because noise from other work only ever adds time.
double seconds_per_call(const std::function<void()>& fn, size_t bytes) {
  fn();
  const int calls = static_cast<int>(
      std::clamp<size_t>((size_t{1} << 30) / std::max<size_t>(bytes, 1), 1, 1000));
  double best = 1e30;
  for (int batch = 0; batch < 5; ++batch) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = Clock::now();
    for (int i = 0; i < calls; ++i) fn();
    double local = std::chrono::duration<double>(Clock::now() - start).count() / calls;
    double slowest = 0;
    MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    best = std::min(best, slowest);
  }
  return best;
}

// Full bytes / time of every rank copying a `full`-byte buffer out of node shared memory, each
// rank's 1/p of it rewritten by its owner before every copy. Only the copy is timed (the
// slowest rank's, best of 5 batches).
double cross_core_copy_gbps(size_t full) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int p = 0, rank = 0;
  MPI_Comm_size(node, &p);
  MPI_Comm_rank(node, &rank);
  const size_t part = full / static_cast<size_t>(p);
  char* mine = nullptr;
  MPI_Win win;
  MPI_Win_allocate_shared(static_cast<MPI_Aint>(part), 1, MPI_INFO_NULL, node, &mine, &win);
  std::vector<char*> parts(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    MPI_Aint size = 0;
    int unit = 0;
    MPI_Win_shared_query(win, r, &size, &unit, &parts[static_cast<size_t>(r)]);
  }
  std::vector<char> out(full);
  const int calls = static_cast<int>(std::clamp<size_t>((size_t{1} << 30) / std::max<size_t>(full, 1), 1, 1000));
  double best = 1e30;
  for (int batch = 0; batch < 6; ++batch) {  // the first batch warms up
    double copying = 0;
    for (int i = 0; i < calls; ++i) {
      std::memset(mine, (batch * calls + i) & 0xff, part);
      MPI_Win_sync(win);
      MPI_Barrier(node);
      const auto start = Clock::now();
      for (int r = 0; r < p; ++r) std::memcpy(out.data() + r * part, parts[static_cast<size_t>(r)], part);
      copying += std::chrono::duration<double>(Clock::now() - start).count();
      MPI_Barrier(node);  // nobody rewrites a part while another rank still reads it
    }
    double local = copying / calls, slowest = 0;
    MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (batch > 0) best = std::min(best, slowest);
  }
  MPI_Win_free(&win);
  MPI_Comm_free(&node);
  return static_cast<double>(full) / best / 1e9;
}

// Nanoseconds for node ranks 0 and 1 to pass a flag there and back through shared memory
// (the mean of 20000 trips; every rank returns rank 0's figure). It tells where the two cores
// are from each other: ~60-100 ns when they share a cache, 250-800 ns when they are far apart
// (another CCD or socket; in a VM the host may move its vCPUs between the two at any time),
// which is what decides the cost of writing lines the other core has read.
double round_trip_ns() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int rank = 0;
  MPI_Comm_rank(node, &rank);
  std::atomic<int64_t>* flag = nullptr;
  MPI_Win win;
  MPI_Win_allocate_shared(rank == 0 ? 64 : 0, 1, MPI_INFO_NULL, node, &flag, &win);
  MPI_Aint size = 0;
  int unit = 0;
  MPI_Win_shared_query(win, 0, &size, &unit, &flag);
  if (rank == 0) new (flag) std::atomic<int64_t>(0);
  MPI_Win_sync(win);
  MPI_Barrier(node);
  constexpr int64_t kTrips = 20000;
  double ns = 0;
  if (rank < 2) {
    const auto start = Clock::now();
    for (int64_t v = rank; v < 2 * kTrips; v += 2) {  // rank 0 moves even values on, rank 1 odd
      while (flag->load(std::memory_order_acquire) != v) {
      }
      flag->store(v + 1, std::memory_order_release);
    }
    ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kTrips;
  }
  MPI_Bcast(&ns, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Win_free(&win);
  MPI_Comm_free(&node);
  return ns;
}

struct Row {
  size_t bytes;
  double round_trip, memcpy, xcore, acc_ag, mpi_ag, acc_rs, mpi_rs, acc_rs_bf16, acc_ar, mpi_ar;  // GB/s
};

}  // namespace

int main(int argc, char** argv) {
  auto& g = acc::bench::init_mpi_and_acc(argc, argv);
  const int p = g.size();
  const std::string json_path = argc > 1 ? argv[1] : ACC_SOURCE_DIR "/bench/results/collectives.json";

  const size_t min_bytes = argc > 2 ? std::stoull(argv[2]) : 0;
  const size_t max_bytes = argc > 3 ? std::stoull(argv[3]) : SIZE_MAX;
  std::vector<Row> rows;
  const size_t kib = 1024, mib = kib * kib;
  for (size_t bytes : {kib, 4 * kib, 16 * kib, 64 * kib, 256 * kib, mib, 4 * mib, 8 * mib,
                       16 * mib, 64 * mib, 256 * mib, 512 * mib}) {
    if (bytes < min_bytes || bytes > max_bytes) continue;
    const int64_t n = static_cast<int64_t>(bytes / 4 / p) * p;  // f32 elements, divisible by p
    const size_t full = static_cast<size_t>(n) * 4;
    auto gbps = [&](double seconds) { return full / seconds / 1e9; };
    Row row{full, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    row.round_trip = round_trip_ns();
    row.xcore = cross_core_copy_gbps(full);
    {
      acc::Tensor a = acc::Tensor::full({n}, 1.0), b = acc::Tensor::zeros({n});
      row.memcpy = gbps(seconds_per_call([&] { std::memcpy(b.raw_data(), a.raw_data(), full); }, full));
    }
    {
      acc::Tensor shard = acc::Tensor::full({n / p}, 1.0), out = acc::Tensor::zeros({n});
      row.acc_ag = gbps(seconds_per_call([&] { g.all_gather(shard, out); }, full));
      row.mpi_ag = gbps(seconds_per_call([&] {
        MPI_Allgather(shard.raw_data(), static_cast<int>(n / p), MPI_FLOAT, out.raw_data(),
                      static_cast<int>(n / p), MPI_FLOAT, MPI_COMM_WORLD);
      }, full));
    }
    {
      acc::Tensor in = acc::Tensor::full({n}, 1.0), shard = acc::Tensor::zeros({n / p});
      row.acc_rs = gbps(seconds_per_call([&] { g.reduce_scatter(in, shard); }, full));
      row.mpi_rs = gbps(seconds_per_call([&] {
        MPI_Reduce_scatter_block(in.raw_data(), shard.raw_data(), static_cast<int>(n / p),
                                 MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }, full));
    }
    {
      // Same element count in bf16: half the bytes, reported against the same f32 size.
      acc::Tensor in = acc::Tensor::full({n}, 1.0, acc::DType::bf16);
      acc::Tensor shard = acc::Tensor::zeros({n / p}, acc::DType::bf16);
      row.acc_rs_bf16 = full / 2 / seconds_per_call([&] { g.reduce_scatter(in, shard); }, full / 2) / 1e9;
    }
    {
      acc::Tensor t = acc::Tensor::full({n}, 1.0), out = acc::Tensor::zeros({n});
      row.acc_ar = gbps(seconds_per_call([&] { g.all_reduce(t); }, full));
      row.mpi_ar = gbps(seconds_per_call([&] {
        MPI_Allreduce(t.raw_data(), out.raw_data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      }, full));
    }
    rows.push_back(row);
    if (g.rank() == 0) std::fprintf(stderr, "  measured %zu bytes\n", full);
  }

  if (g.rank() == 0) {
    std::printf("collectives at %d ranks, f32, GB/s = bytes of the full buffer / time\n", p);
    std::printf("(xmem: of memcpy; xcore: of the cross-core copy, target >= 0.7 from 1 MB;\n"
                " rt: ns for a flag to go from rank 0 to rank 1 and back, ~60-100 when near)\n");
    std::printf("%10s %5s %8s %8s | %8s %8s %5s %5s | %8s %8s %5s %5s %8s | %8s %8s\n", "bytes", "rt",
                "memcpy", "xcore", "acc AG", "MPI AG", "xmem", "xcore", "acc RS", "MPI RS", "xmem",
                "xcore", "RS bf16", "acc AR", "MPI AR");
    for (const Row& r : rows)
      std::printf("%10zu %5.0f %8.2f %8.2f | %8.2f %8.2f %5.2f %5.2f | %8.2f %8.2f %5.2f %5.2f %8.2f | %8.2f %8.2f\n",
                  r.bytes, r.round_trip, r.memcpy, r.xcore, r.acc_ag, r.mpi_ag, r.acc_ag / r.memcpy,
                  r.acc_ag / r.xcore, r.acc_rs, r.mpi_rs, r.acc_rs / r.memcpy, r.acc_rs / r.xcore,
                  r.acc_rs_bf16, r.acc_ar, r.mpi_ar);
    std::ostringstream out;
    out << "{\n  \"benchmark\": \"collectives\",\n  \"ranks\": " << p << ",\n  \"cpu\": \""
        << acc::bench::cpu_model() << "\",\n  \"date\": \""
        << acc::bench::utc_timestamp()
        << "\",\n  \"unit\": \"GB/s (bytes of the full f32 buffer / time)\",\n  \"rows\": [\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << "    {\"bytes\": " << r.bytes << ", \"round_trip_ns\": " << r.round_trip
          << ", \"memcpy\": " << r.memcpy
          << ", \"cross_core_copy\": " << r.xcore
          << ", \"acc_all_gather\": " << r.acc_ag << ", \"mpi_allgather\": " << r.mpi_ag
          << ", \"acc_reduce_scatter\": " << r.acc_rs
          << ", \"mpi_reduce_scatter_block\": " << r.mpi_rs
          << ", \"acc_reduce_scatter_bf16\": " << r.acc_rs_bf16
          << ", \"acc_all_reduce\": " << r.acc_ar << ", \"mpi_allreduce\": " << r.mpi_ar << "}"
          << (i + 1 < rows.size() ? "," : "") << "\n";
    }
    out << "  ]\n}\n";
    acc::bench::write_results(json_path, out.str());
  }
  acc::bench::shutdown_acc_and_mpi();
  return 0;
}
