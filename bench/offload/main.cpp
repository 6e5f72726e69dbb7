// The AdamW step over state in the file memory tier (fsdp_offload_dir), next to the disk's raw
// sequential read and write measured in the same run.
//
//   bench_offload [--gib G] [--dir DIR] [--steps S] [--out FILE]
//
// One tensor of G GiB of f32 master weights, its gradient and AdamW's two moments, all four in
// files under DIR (as FSDP keeps them with offload_dir). Each step reads the four and writes
// three back; the writes land in the page cache and the kernel writes them back afterwards, so
// what the step waits for is the reading. It is timed twice:
//   from disk   after the page cache is emptied (sync + /proc/sys/vm/drop_caches, as root;
//               without root the row says so and measures whatever the cache holds), against
//               a raw read() of the same bytes from the disk;
//   cached      the next steps, the state in the page cache as far as it fits, against memcpy.
// The raw write (write() in 64 MiB blocks, then fsync) is printed for the writeback's side.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "acc/memory/allocator.h"
#include "acc/memory/resident.h"
#include "acc/optim/adamw.h"
#include "acc/tensor/tensor.h"
#include "acc/util/error.h"
#include "support/measure.h"
#include "support/raw_disk.h"

namespace fs = std::filesystem;
using namespace acc;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Empties the page cache; false without the privilege to.
bool drop_page_cache() {
  ::sync();
  std::ofstream drop("/proc/sys/vm/drop_caches");
  if (!drop) return false;
  drop << "1\n";
  drop.flush();
  return static_cast<bool>(drop);
}

struct RawDisk {
  double write_gbs = 0, read_gbs = 0;
};

// Writes `bytes` and fsyncs, then reads them back from the disk (bench::raw_write_file).
RawDisk raw_disk(const fs::path& dir, int64_t bytes) {
  const fs::path file = dir / "acc-bench-raw.bin";
  const bench::RawWriteTimes written = bench::raw_write_file(file, bytes);
  RawDisk disk;
  disk.write_gbs = static_cast<double>(bytes) / (written.write_seconds + written.fsync_seconds) / 1e9;
  bench::drop_file_from_page_cache(file);
  const double t0 = now();
  const int64_t got = bench::raw_read_file(file);
  disk.read_gbs = static_cast<double>(got) / (now() - t0) / 1e9;
  fs::remove(file);
  return disk;
}

}  // namespace

int main(int argc, char** argv) {
  double gib = 1.0;
  int steps = 2;
  fs::path dir = ".";
  std::string out = "bench/results/offload.json";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--gib") gib = std::stod(value);
    else if (key == "--dir") dir = value;
    else if (key == "--steps") steps = std::stoi(value);
    else if (key == "--out") out = value;
    else ACC_FAIL("unknown option ", key, " (expected --gib, --dir, --steps, --out)");
  }
  const int64_t numel = static_cast<int64_t>(gib * (1 << 30)) / 4;
  const int64_t tensor_bytes = numel * 4;
  memory::set_file_tier_dir(dir, 4 * tensor_bytes);

  const RawDisk disk = raw_disk(dir, 3 * tensor_bytes);
  memory::release_cached();  // the raw read's buffer is not kept beside the state
  Tensor param, grad;
  {
    memory::TierScope tier(memory::Tier::file);
    param = Tensor::full({numel}, 0.5f);
    grad = Tensor::full({numel}, 1e-3f);
    page_out(param);
    page_out(grad);
  }
  param.set_requires_grad(true);
  param.set_grad(grad);
  optim::AdamW adamw({param});
  adamw.step();  // makes the moments (in the file tier: the parameter's)
  const double state_gb = 4.0 * static_cast<double>(tensor_bytes) / 1e9;  // what a step reads
  const double memcpy = bench::memcpy_gbps();

  std::vector<bench::Row> rows;
  rows.push_back({"raw write (+fsync)", "GB/s", disk.write_gbs, 0, "", 0});
  rows.push_back({"raw read (from disk)", "GB/s", disk.read_gbs, 0, "", 0});
  const bool dropped = drop_page_cache();
  for (int s = 0; s < steps; ++s) {
    const memory::StorageIo before = memory::storage_io();
    const double t0 = now();
    adamw.step();
    const double seconds = now() - t0;
    const memory::StorageIo after = memory::storage_io();
    const bool cold = s == 0 && dropped;
    const std::string name = cold ? "AdamW step, from disk" : "AdamW step, cached";
    // As the rate the step reads the state at, so that the ratio reads as "of the disk's speed".
    rows.push_back({name, "GB/s", state_gb / seconds, cold ? disk.read_gbs : memcpy,
                    cold ? "raw read" : "memcpy", cold ? 0.8 : 0});
    std::printf("%s: %.2f s; the kernel read %.2f GB from the disk, %.2f GB were dirtied for writeback\n",
                name.c_str(), seconds, static_cast<double>(after.read - before.read) / 1e9,
                static_cast<double>(after.written - before.written) / 1e9);
  }
  bench::report("AdamW over the file tier", rows, out,
                {{"cpu", bench::cpu_model()},
                 {"when", bench::utc_timestamp()},
                 {"state", std::to_string(gib) + " GiB per tensor: master, gradient, exp_avg, exp_avg_sq"},
                 {"page cache dropped", dropped ? "yes" : "no (not root): the from-disk row is cached"}});
  return 0;
}
