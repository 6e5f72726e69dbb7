// bench_p2p: point to point between world ranks 0 and 1 through acc's process group (send/recv,
// what pipeline stages exchange), next to OpenMPI's MPI_Send/MPI_Recv called directly and a
// memcpy on one core, all in the same run. Each figure is a ping-pong: time one way = half a
// round trip (best of 5 batches); GB/s = bytes / time one way. Which transport acc used is the
// environment's: the shared-memory mailbox by default on one node, MPI messages through the
// comm thread with ACC_SHM_P2P=0 (the path before the mailbox). Run under mpirun -np 2
// (bench/collectives/p2p.sh runs it bound and unbound, each transport).
// Usage: bench_p2p JSON_PATH
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <functional>
#include <string>
#include <vector>

#include "acc/runtime/init.h"
#include "collectives/mpi_beside_acc.h"
#include "acc/tensor/tensor.h"
#include "support/measure.h"

namespace {

using Clock = std::chrono::steady_clock;

// Seconds one way: round trips of `trip` in 5 batches after a warm-up, the best batch's mean / 2.
double one_way_seconds(const std::function<void()>& trip, size_t bytes) {
  trip();
  const int trips = static_cast<int>(std::clamp<size_t>((size_t{256} << 20) / std::max<size_t>(bytes, 1), 20, 2000));
  double best = 1e30;
  for (int batch = 0; batch < 5; ++batch) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = Clock::now();
    for (int i = 0; i < trips; ++i) trip();
    double mine = std::chrono::duration<double>(Clock::now() - start).count() / trips / 2, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    best = std::min(best, slowest);
  }
  return best;
}

std::string transport() {
  const char* shm = std::getenv("ACC_SHM");
  const char* p2p = std::getenv("ACC_SHM_P2P");
  const bool messages = (shm && std::string(shm) == "0") || (p2p && std::string(p2p) == "0");
  return messages ? "MPI messages (comm thread)" : "shared-memory mailbox";
}

bool bound_to_one_core() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1;
}

struct Row {
  size_t bytes;
  double acc_s, mpi_s, memcpy_gbps;
};

}  // namespace

int main(int argc, char** argv) {
  auto& g = acc::bench::init_mpi_and_acc(argc, argv);
  if (g.size() != 2 || argc < 2) {
    if (g.rank() == 0) std::fprintf(stderr, "usage: mpirun -np 2 bench_p2p JSON_PATH\n");
    acc::bench::shutdown_acc_and_mpi();
    return 2;
  }
  const std::string json_path = argv[1];
  const int peer = 1 - g.rank();
  MPI_Comm direct;
  MPI_Comm_dup(MPI_COMM_WORLD, &direct);
  std::vector<Row> rows;
  for (size_t bytes : {size_t{8}, size_t{1} << 10, size_t{64} << 10, size_t{1} << 20, size_t{4} << 20,
                       size_t{16} << 20, size_t{64} << 20}) {
    const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(bytes / 4));
    acc::Tensor out = acc::Tensor::full({n}, 1.0), in = acc::Tensor::zeros({n});
    Row row{static_cast<size_t>(n) * 4, 0, 0, 0};
    row.acc_s = one_way_seconds([&] {
      if (g.rank() == 0) {
        g.send(out, peer, 1);
        g.recv(in, peer, 1);
      } else {
        g.recv(in, peer, 1);
        g.send(out, peer, 1);
      }
    }, row.bytes);
    const int count = static_cast<int>(n);
    row.mpi_s = one_way_seconds([&] {
      if (g.rank() == 0) {
        MPI_Send(out.raw_data(), count, MPI_FLOAT, peer, 1, direct);
        MPI_Recv(in.raw_data(), count, MPI_FLOAT, peer, 1, direct, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(in.raw_data(), count, MPI_FLOAT, peer, 1, direct, MPI_STATUS_IGNORE);
        MPI_Send(out.raw_data(), count, MPI_FLOAT, peer, 1, direct);
      }
    }, row.bytes);
    // The ceiling: one core copying the same bytes (both ranks at once, as the trips copy).
    const double copy_s = one_way_seconds([&] {
      std::memcpy(in.raw_data(), out.raw_data(), row.bytes);
      std::memcpy(out.raw_data(), in.raw_data(), row.bytes);
    }, row.bytes);
    row.memcpy_gbps = row.bytes / copy_s / 1e9;
    rows.push_back(row);
  }
  MPI_Comm_free(&direct);

  if (g.rank() == 0) {
    const std::string how = transport() + (bound_to_one_core() ? ", ranks bound to a core each" : ", ranks unbound");
    std::printf("point to point at 2 ranks, acc through the %s; %s\n", how.c_str(), acc::bench::cpu_model().c_str());
    std::printf("(one way = half a ping-pong; GB/s = bytes / one way; xcopy: of memcpy on one core)\n");
    std::printf("%10s | %10s %8s %6s | %10s %8s | %8s\n", "bytes", "acc us", "acc GB/s", "xcopy", "MPI us",
                "MPI GB/s", "memcpy");
    for (const Row& r : rows)
      std::printf("%10zu | %10.2f %8.2f %6.2f | %10.2f %8.2f | %8.2f\n", r.bytes, r.acc_s * 1e6,
                  r.bytes / r.acc_s / 1e9, r.bytes / r.acc_s / 1e9 / r.memcpy_gbps, r.mpi_s * 1e6,
                  r.bytes / r.mpi_s / 1e9, r.memcpy_gbps);
    std::ostringstream out;
    out << "{\n  \"benchmark\": \"p2p\",\n  \"transport\": \"" << how << "\",\n  \"cpu\": \""
        << acc::bench::cpu_model() << "\",\n  \"date\": \"" << acc::bench::utc_timestamp()
        << "\",\n  \"unit\": \"microseconds one way (half a ping-pong), GB/s = bytes / that\",\n  \"rows\": [\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << "    {\"bytes\": " << r.bytes << ", \"acc_us\": " << r.acc_s * 1e6 << ", \"mpi_us\": " << r.mpi_s * 1e6
          << ", \"memcpy_gbps\": " << r.memcpy_gbps << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
    }
    out << "  ]\n}\n";
    acc::bench::write_results(json_path, out.str());
  }
  acc::bench::shutdown_acc_and_mpi();
  return 0;
}
