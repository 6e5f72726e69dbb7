#pragma once
// Timing and reporting shared by acc's benchmarks. Every benchmark prints its numbers next to a
// ceiling measured in the same run (GEMM peak, memcpy bandwidth) and against the previous
// results file, so a number is never read without its context.
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace acc::bench {

// Seconds of the steady clock since t0.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best time per call in seconds: calls fn until min_seconds have passed (after one warm-up
// call), in batches, and keeps the fastest batch average. Best-of is used because the
// machine's noise only ever adds time.
double seconds_per_call(const std::function<void()>& fn, double min_seconds = 0.3);

// Bandwidth of memcpy over `bytes`, split over acc's threads (counting read + write, i.e.
// 2*bytes per copy), GB/s.
double memcpy_gbps(size_t bytes = size_t{256} << 20);

std::string cpu_model();
std::string utc_timestamp();

// One row of a results table: a name, its measured value, the ceiling it is compared with.
struct Row {
  std::string name;
  std::string unit;     // "GFLOP/s", "GB/s", "ms"
  double value = 0;
  double ceiling = 0;   // 0 when there is no ceiling for this row
  std::string ceiling_name;
  double target = 0;    // wanted value/ceiling ratio, 0 when none: at most this for sizes,
                        // times and shares (MB, ms, s, %), at least this for rates
};

// Writes `text` to `path` (its folder made if missing) through `path`.tmp and a rename, so a
// results file is never left half written; says where.
void write_results(const std::string& path, const std::string& text);

// Prints rows as a table with ratio-to-ceiling and change against `previous_json` (if it
// exists), then writes all rows to `json_path` (write_results).
void report(const std::string& title, const std::vector<Row>& rows, const std::string& json_path,
            const std::map<std::string, std::string>& context);

}  // namespace acc::bench
