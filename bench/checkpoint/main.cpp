// bench_checkpoint: save and load time of acc::checkpoint for GPT-2 under FULL_SHARD (wrap
// class GPT2Block, AdamW with its state allocated by one step), sharded, full and asynchronous,
// next to the disk's raw write and read bandwidth measured in the same run on the same
// directory; and the extra memory a FULL_STATE_DICT save needs on rank 0 (the writer) next to
// the largest FSDP unit.
// One world size per run: run.sh runs 1, 2 and 4 ranks and leaves bench/results/checkpoint.json.
//   bench_checkpoint [--model small|medium|tiny] [--dir DIR] [--repeats 3] [--out FILE]
//                    [--load-pairs N]  (only N rounds of FULL load pairs from the warm disk)
// Ceilings and targets:
//   sharded save bandwidth (total bytes of the checkpoint / time, fsync included) against the
//     raw write ceiling: every rank write()s as many bytes as its shard file to a file of its
//     own in the same directory, then fsync()s it, all at once (target >= 0.8x);
//   the time an asynchronous save blocks training against the synchronous sharded save (target
//     <= 0.1x): save_async, then one training step (4 sequences of 128 tokens per rank) whose
//     optimizer update waits for the copy of the state: the time save_async takes plus that
//     wait (profiler mark checkpoint.wait). Reported beside it: how much longer that step took
//     than one without a save (on 2 cores the background copy and write compete with the
//     step's threads), and the time until the commit (finish_saves() right after);
//   FULL load time against a raw read: from the page cache, against every rank read()ing that
//     file back, all at once; from the disk (the files dropped from the cache with
//     posix_fadvise(DONTNEED), no privileges needed), against a raw read of the checkpoint's own
//     files paired with each load: every rank pread()s its share of their bytes with as many
//     threads as the load has, right before one load and right after another (so neither order
//     is favoured). This VM's disk is a host's cache in front of a disk: a file read a moment
//     ago comes at ~5-6 GB/s ("warm", where the load's own work shows most); one left alone for a
//     few seconds sometimes at ~1 GB/s, as a resume in a new job would meet it ("idle", after
//     a pause; whether the host let the files go shows in the raw reads' times); both are
//     measured, each pair in one state. Target: the median of the pairs' ratios >= 0.8x (the load
//     at 0.8x the raw read's speed), the worst pair shown beside it. Beside each warm pair, a
//     checked read of the same share (bench::checked_read_share: the raw read with every read
//     summed by CRC-32), against the same raw read: what reading and checking alone cost, so
//     that the rest of the load's work shows apart. The raw reads' buffers come from acc's
//     allocator (huge pages, as the load's). Also reported: the raw file read from the disk just
//     after it was written, into one reused buffer and into new memory from acc's allocator
//     (where a load's bytes land: a load fills new tensors);
//   allocator peak during the FULL save minus what was live before it, rank 0, against the f32
//     bytes of the largest wrap unit (a GPT2Block, or the root: everything outside the blocks,
//     the embeddings) (target <= 1x).
// Loads go into an optimizer that has not stepped, as a resume's do: the load makes its state,
// in memory fresh from the system (freed blocks returned first, as a new process has none).
// They read what the saves just wrote, from the page cache, and again after the files were
// dropped from it (from the disk).
// Each time is the best of --repeats interleaved rounds (see run()); loads from the disk go by
// the median of their pairs' ratios.
#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "acc/acc.h"
#include "acc/distributed/agreement.h"
#include "acc/io/safetensors.h"
#include "acc/memory/allocator.h"
#include "acc/runtime/threads.h"
#include "acc/train/cli.h"
#include "acc/util/error.h"
#include "acc/util/profiler.h"
#include "support/measure.h"
#include "support/raw_disk.h"
#include "support/random_tokens.h"

namespace {

using namespace acc;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

using bench::RandomTokens;
using bench::seconds_since;

// Every rank's value, in rank order. A collective.
std::vector<double> gather(double mine) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", mine);
  std::vector<double> out;
  for (const auto& s : dist::all_gather_strings(world(), buf)) out.push_back(std::stod(s));
  return out;
}
double max_over_ranks(double mine) {
  const auto all = gather(mine);
  return *std::max_element(all.begin(), all.end());
}

// fn on every rank at once between two barriers; the slowest rank's time.
double timed(const std::function<void()>& fn) {
  world().barrier();
  const auto t0 = clock_type::now();
  fn();
  const double s = seconds_since(t0);
  world().barrier();
  return max_over_ranks(s);
}

// Bytes of every regular file under dir.
int64_t bytes_under(const fs::path& dir) {
  int64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) total += static_cast<int64_t>(e.file_size());
  return total;
}

// f32 bytes of the largest wrap unit: each GPT2Block (transformer.h.{i}.*) is one unit, the
// root holds every parameter outside them (wte, wpe, ln_f).
int64_t largest_unit_bytes(const models::Model& model) {
  std::map<std::string, int64_t> units;
  const std::string blocks = "transformer.h.";
  for (const auto& [name, p] : model.named_parameters()) {
    std::string unit = "(root)";
    if (name.rfind(blocks, 0) == 0) unit = name.substr(0, name.find('.', blocks.size()));
    units[unit] += p.numel() * 4;
  }
  int64_t largest = 0;
  for (const auto& [_, bytes] : units) largest = std::max(largest, bytes);
  return largest;
}

struct RawWrite {
  double seconds = 0;        // slowest rank: open + write + fsync + close
  double write_seconds = 0;  // slowest rank's write() part (into the page cache)
  double fsync_seconds = 0;  // slowest rank's fsync() part
  double read_seconds = 0;   // slowest rank: reading the file back (open + read + close)
  double cold_read_seconds = 0;  // the same with the file dropped from the page cache first
  // The same again from the disk, into new memory from acc's allocator (what a load fills)
  // instead of one reused buffer.
  double cold_read_new_seconds = 0;
};

// Drops the (written back, so clean) pages of `path`, a file or every file under a directory,
// from the page cache on every rank: the next read comes from the disk.
void drop_from_page_cache(const fs::path& path) {
  if (fs::is_directory(path)) {
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (e.is_regular_file()) bench::drop_file_from_page_cache(e.path());
  } else if (fs::exists(path)) {
    bench::drop_file_from_page_cache(path);
  }
  world().barrier();
}

// How long the files are left alone before an "idle" read: this host's cache lets a file go
// within about 3 s (a pause of 3 s took reads of GPT-2 small's checkpoint from ~0.3 to 1.2-1.5 s).
constexpr auto kIdle = std::chrono::seconds(5);

// The regular files under dir, in path order.
std::vector<fs::path> files_under(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The middle of v (the mean of the two middle values for an even count).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// FULL loads from the disk, each beside a raw read of the same files: their times and ratios.
struct Pairs {
  std::vector<double> load_s, raw_s, ratio;  // ratio: raw read time / load time, per pair
  void add(double raw, double load) {
    raw_s.push_back(raw);
    load_s.push_back(load);
    ratio.push_back(raw / load);
  }
  double best_load() const { return *std::min_element(load_s.begin(), load_s.end()); }
  double best_raw() const { return *std::min_element(raw_s.begin(), raw_s.end()); }
  double median_ratio() const { return median(ratio); }  // the target's
  double worst_ratio() const { return *std::min_element(ratio.begin(), ratio.end()); }
  // Beside some pairs: a checked read (bench::checked_read_share) and the raw read's time over
  // its time.
  std::vector<double> checked_s, checked_ratio;
  void add_checked(double raw, double checked) {
    checked_s.push_back(checked);
    checked_ratio.push_back(raw / checked);
  }
  double best_checked() const { return *std::min_element(checked_s.begin(), checked_s.end()); }
  double median_checked_ratio() const { return median(checked_ratio); }
  // Into the results under `name`: the figures above and every pair.
  void report(Poco::JSON::Object& r, const std::string& name) const;
};

// fn on every rank at once (timed()), its failure on any rank raised on all, naming `what`.
double timed_on_all(const char* what, const std::function<void()>& fn) {
  std::exception_ptr error;
  const double s = timed([&] {
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  });
  dist::raise_if_any_failed(world(), what, error);
  return s;
}

// Every rank writes `bytes` to dir/raw-<rank>.bin (bench::raw_write_file), all ranks at once;
// then they read it back, from the page cache and from the disk. The files are removed
// afterwards.
RawWrite raw_write(const fs::path& dir, int64_t bytes) {
  const fs::path file = dir / ("raw-" + std::to_string(world().rank()) + ".bin");
  bench::RawWriteTimes times;
  const double total = timed_on_all("raw write", [&] { times = bench::raw_write_file(file, bytes); });
  const double read_s = timed_on_all("raw read", [&] { bench::raw_read_file(file); });
  drop_from_page_cache(file);
  const double cold_read_s = timed_on_all("raw read", [&] { bench::raw_read_file(file); });
  drop_from_page_cache(file);
  memory::release_cached();
  const double cold_read_new_s = timed_on_all("raw read", [&] {
    const size_t n = static_cast<size_t>(bytes);
    void* dst = memory::allocate(n, memory::Category::checkpoint);
    bench::raw_read_file_into(file, static_cast<char*>(dst), bytes);
    memory::deallocate(dst, n, memory::Category::checkpoint);
  });
  memory::release_cached();  // not kept beside the saves that follow
  std::error_code ignored;
  fs::remove(file, ignored);
  return {total, max_over_ranks(times.write_seconds), max_over_ranks(times.fsync_seconds), read_s, cold_read_s,
          cold_read_new_s};
}

// CRC-32 (io::crc32, ISA-L) throughput of this rank's thread (every rank runs it at once), GB/s: what every
// saved and loaded byte goes through.
double crc32_gbps() {
  std::vector<char> buffer(size_t{64} << 20, 1);
  uint32_t sink = 0;
  const double s = bench::seconds_per_call([&] { sink ^= io::crc32(buffer.data(), buffer.size()); }, 0.2);
  if (sink == 0xdeadbeef) std::printf(" ");  // keep the call
  return static_cast<double>(buffer.size()) / s / 1e9;
}

// A memory peak around fn on this rank: (allocator peak during fn) - (live before fn), total
// and the category that grew most.
struct Extra {
  int64_t total = 0;
  std::map<std::string, int64_t> by_category;
};
Extra peak_extra(const std::function<void()>& fn) {
  const memory::Report before = memory::report();
  memory::reset_peaks();
  fn();
  const memory::Report after = memory::report();
  Extra e;
  e.total = after.total.peak - before.total.current;
  for (size_t c = 0; c < memory::kNumCategories; ++c) {
    const int64_t grew = after.by_category[c].peak - before.by_category[c].current;
    if (grew >= 100000) e.by_category[std::string(memory::category_name(static_cast<memory::Category>(c)))] = grew;
  }
  return e;
}

double mb(int64_t bytes) { return static_cast<double>(bytes) / 1e6; }

std::string bench_format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

Poco::JSON::Array::Ptr json_array(const std::vector<double>& v) {
  Poco::JSON::Array::Ptr a = new Poco::JSON::Array;
  for (double x : v) a->add(x);
  return a;
}

void Pairs::report(Poco::JSON::Object& r, const std::string& name) const {
  const std::string load = "full_load_from_" + name + "_disk", raw = "raw_read_beside_" + name + "_load";
  r.set(load + "_s", best_load());
  r.set(load + "_s_all", json_array(load_s));
  r.set(raw + "_s", best_raw());
  r.set(raw + "_s_all", json_array(raw_s));
  r.set(load + "_vs_raw_read", median_ratio());
  r.set(load + "_vs_raw_read_worst", worst_ratio());
  r.set(load + "_vs_raw_read_all", json_array(ratio));
  if (checked_s.empty()) return;
  const std::string checked = "checked_read_from_" + name + "_disk";
  r.set(checked + "_s", best_checked());
  r.set(checked + "_s_all", json_array(checked_s));
  r.set(checked + "_vs_raw_read", median_checked_ratio());
  r.set(checked + "_vs_raw_read_all", json_array(checked_ratio));
}

// The results file: {"title", "date", "cpu", "notes", "runs": [one object per (model, ranks)]};
// this run's object replaces an earlier one of the same model and world size.
Poco::JSON::Array::Ptr merge_results(const std::string& path, Poco::JSON::Object::Ptr run) {
  std::vector<Poco::JSON::Object::Ptr> runs;
  if (fs::exists(path)) try {
      std::ifstream in(path);
      Poco::JSON::Parser parser;
      auto root = parser.parse(in).extract<Poco::JSON::Object::Ptr>();
      auto old = root->getArray("runs");
      for (size_t i = 0; old && i < old->size(); ++i) {
        auto o = old->getObject(static_cast<unsigned>(i));
        if (o->getValue<std::string>("model") == run->getValue<std::string>("model") &&
            o->getValue<int>("ranks") == run->getValue<int>("ranks"))
          continue;
        runs.push_back(o);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "note: replacing unreadable %s: %s\n", path.c_str(), e.what());
    }
  runs.push_back(run);
  std::stable_sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) {
    const auto ma = a->template getValue<std::string>("model"), mb_ = b->template getValue<std::string>("model");
    if (ma != mb_) return ma > mb_;  // small before medium before ... (then tiny)
    return a->template getValue<int>("ranks") < b->template getValue<int>("ranks");
  });
  Poco::JSON::Array::Ptr out = new Poco::JSON::Array;
  for (const auto& r : runs) out->add(r);
  return out;
}

void write_results(const std::string& path, Poco::JSON::Array::Ptr runs) {
  Poco::JSON::Object root;
  root.set("title", "acc::checkpoint save/load, GPT-2 under FULL_SHARD (wrap GPT2Block) + AdamW");
  root.set("date", bench::utc_timestamp());
  root.set("cpu", bench::cpu_model());
  root.set("notes",
           "save times include fsync of every file and the directory commit; raw_write_gbs: every "
           "rank write()+fsync() of as many bytes as its shard file, same directory, same run; "
           "raw_read_s: every rank read() of that file right after (page cache); raw_read_from_disk_s: the "
           "same after posix_fadvise(DONTNEED) dropped the file from the page cache; "
           "raw_read_into_new_memory_from_disk_s: the same into a new block of acc's allocator (what a load "
           "fills) instead of one reused 64 MiB buffer; full_load_from_warm_disk_s: the FULL checkpoint dropped "
           "from the page cache, then loaded, right after a read of its files (this host's cache then serves "
           "them at ~5-6 GB/s); full_load_from_idle_disk_s: the same after a pause of 5 s (after which the host "
           "sometimes, not always, serves them at ~1 GB/s: see the raw reads' times); "
           "raw_read_beside_*_load_s: every rank pread() of its share of the same files with as many threads "
           "as the load has, dropped first, in the same state, right before one load and right after another; "
           "full_load_from_*_disk_vs_raw_read: the median over those pairs of raw read time / load time "
           "(_all: every pair, _worst: the lowest); checked_read_from_warm_disk_s: the best of the checked reads "
           "taken before and after each warm pair (every rank pread() of its share as the raw read does, each "
           "read summed with CRC-32: the reading and checking a load cannot skip), _vs_raw_read: the median of "
           "the raw read's time / the checked read's (each against its pair's raw read; _all: every one); "
           "async_blocked_s: "
           "save_async's time plus the next step's wait for the state's copy; async_step_slower_s: how "
           "much longer that step (4 x 128 tokens per rank) took than step_s without a save; "
           "async_total_s: until finish_saves() committed it; "
           "loads read what was just written, likely from the page cache (memory- and CRC-bound); "
           "full_save_peak_extra_mb: acc allocator peak during the FULL save minus live bytes "
           "before it, rank 0 (the writer); largest_unit_mb: f32 bytes of the largest wrap unit");
  root.set("runs", runs);
  std::ostringstream text;
  root.stringify(text, 2);
  acc::bench::write_results(path, text.str());
}

void print_table(Poco::JSON::Array::Ptr runs) {
  // From the disk, warm and idle: the FULL load's best, the paired raw read's best, the median
  // of the pairs' ratios (the target) and the worst; for warm also the checked reads' median
  // ratio to the raw read.
  std::printf("\n%-7s %5s %8s | %8s | %8s %8s %8s | %8s %8s %8s | %8s %8s | %8s | %8s %8s %8s | %8s %8s %8s "
              "%8s %8s | %8s %8s %8s %8s | %10s %9s %8s\n",
              "model", "ranks", "params", "raw GB/s", "shd save", "GB/s", "vs raw", "async", "vs sync", "async",
              "shd load", "shd load", "full sav", "full ld", "raw read", "vs raw", "full ld", "raw read", "vs raw",
              "worst", "checked", "full ld", "raw read", "vs raw", "worst", "peak+ MB", "unit MB", "vs unit");
  std::printf("%-7s %5s %8s | %8s | %8s %8s %8s | %8s %8s %8s | %8s %8s | %8s | %8s %8s %8s | %8s %8s %8s "
              "%8s %8s | %8s %8s %8s %8s | %10s %9s %8s\n",
              "", "", "(M)", "write", "(s)", "", "(>=0.8)", "blocks s", "(<=0.1)", "total s", "cache s", "disk s",
              "(s)", "cache s", "cache s", "", "warm s", "beside s", "(>=0.8)", "pair", "vs raw", "idle s",
              "beside s", "(>=0.8)", "pair", "full save", "largest", "(<=1.0)");
  for (size_t i = 0; i < runs->size(); ++i) {
    auto r = runs->getObject(static_cast<unsigned>(i));
    auto d = [&](const std::string& k) { return r->getValue<double>(k); };
    auto mark = [](bool met) { return met ? " " : "!"; };
    const double vs_raw = d("sharded_save_vs_raw"), vs_unit = d("full_peak_vs_unit");
    const double blocked = d("async_blocked_vs_sync");
    std::printf("%-7s %5d %8.1f | %8.2f | %8.2f %8.2f %7.2f%s | %8.3f %7.3f%s %8.2f | %8.2f %8.2f | %8.2f | "
                "%8.2f %8.2f %8.2f |",
                r->getValue<std::string>("model").c_str(), r->getValue<int>("ranks"), d("params") / 1e6,
                d("raw_write_gbs"), d("sharded_save_s"), d("sharded_save_gbs"), vs_raw, mark(vs_raw >= 0.8),
                d("async_blocked_s"), blocked, mark(blocked <= 0.1), d("async_total_s"), d("sharded_load_s"),
                d("sharded_load_from_disk_s"), d("full_save_s"), d("full_load_s"), d("raw_read_s"),
                d("full_load_vs_raw_read"));
    const std::string checked = "checked_read_from_warm_disk_vs_raw_read";  // not in older runs
    for (const std::string name : {"warm", "idle"}) {
      const std::string load = "full_load_from_" + name + "_disk";
      const double ratio = d(load + "_vs_raw_read");
      std::printf(" %8.2f %8.2f %7.2f%s %8.2f", d(load + "_s"), d("raw_read_beside_" + name + "_load_s"), ratio,
                  mark(ratio >= 0.8), d(load + "_vs_raw_read_worst"));
      if (name == "warm") std::printf(" %8.2f", r->has(checked) ? d(checked) : std::nan(""));
      std::printf(" |");
    }
    std::printf(" %10.1f %9.1f %7.2f%s\n", d("full_save_peak_extra_mb"), d("largest_unit_mb"), vs_unit,
                mark(vs_unit <= 1.0));
  }
  std::printf("(! = target missed)\n");
}

int run(int argc, char** argv) {
  train::Args args(argc, argv);
  const std::string model_name = args.get("model", "small");
  const std::string dir_arg = args.get("dir", "");
  const std::string out = args.get("out", "bench/results/checkpoint.json");
  const int repeats = static_cast<int>(args.get_int("repeats", 3));
  ACC_CHECK(repeats >= 1, "--repeats must be at least 1");
  const int load_pairs = static_cast<int>(args.get_int("load-pairs", 0));
  ACC_CHECK(load_pairs >= 0, "--load-pairs must be 0 or more");
  args.finish();
  auto& group = world();
  const bool main_rank = group.rank() == 0;
  auto say = [&](const char* fmt, auto... a) {
    if (!main_rank) return;
    std::printf(fmt, a...);
    std::fflush(stdout);
  };

  // The working directory, one per run: made by rank 0, its name shared.
  std::string work;
  if (main_rank) {
    const fs::path parent = dir_arg.empty() ? fs::temp_directory_path() : fs::path(dir_arg);
    fs::create_directories(parent);
    std::string templ = (parent / "acc_bench_checkpoint.XXXXXX").string();
    ACC_CHECK(::mkdtemp(templ.data()) != nullptr, "cannot create a directory under ", parent.string(),
              ": ", std::strerror(errno));
    work = templ;
  }
  work = dist::all_gather_strings(group, work)[0];
  const fs::path work_dir(work);
  struct Cleanup {
    fs::path dir;
    bool main;
    ~Cleanup() {
      std::error_code ignored;
      if (main) fs::remove_all(dir, ignored);
    }
  } cleanup{work_dir, main_rank};

  // The model, wrapped, with AdamW state from one step on a tiny synthetic batch.
  const models::GPT2Config gpt = models::GPT2Config::from_name_or_file(model_name);
  auto gpt2 = std::make_shared<models::GPT2>(gpt, 0);
  int64_t params = 0;
  for (const auto& [_, p] : gpt2->named_parameters()) params += p.numel();
  const int64_t unit_bytes = largest_unit_bytes(*gpt2);
  Config config;
  config.dist.distributed_type = DistributedType::FSDP;
  config.dist.fsdp.sharding_strategy = ShardingStrategy::FULL_SHARD;
  config.dist.fsdp.wrap_layer_cls = {"GPT2Block"};
  // The training step the asynchronous save runs behind: 4 sequences of 128 tokens per rank.
  const int64_t batch = 4 * group.size(), seq = 128;
  data::DataLoader loader(std::make_shared<RandomTokens>(batch, seq, gpt.vocab_size),
                          {.batch_size = batch, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(gpt2, loader, config);
  gpt2.reset();
  optim::AdamW opt(sharded->param_groups(0.1), {.lr = 1e-4});
  auto train_step = [&] {
    opt.zero_grad();
    sharded->forward(*rank_loader.begin()).loss.backward();
    opt.step();
  };
  {
    const auto t0 = clock_type::now();
    train_step();
    opt.zero_grad();
    say("GPT-2 %s (%.1fM parameters), %d rank(s) x %d thread(s), a first training step (4 x 128 tokens "
        "per rank) in %.1f s\n",
        model_name.c_str(), static_cast<double>(params) / 1e6, group.size(), runtime::num_threads(),
        seconds_since(t0));
  }
  // Loads are timed as a resume does them: into an optimizer that has not stepped yet, whose
  // state tensors the load makes (and fills while it checks the files).
  // As a resume finds it: an optimizer without state, and (a new process) no freed memory to
  // reuse, so the state the load makes is fresh pages, faulted in on first touch.
  auto forget_optimizer_state = [&opt] {
    for (size_t g = 0; g < opt.param_groups().size(); ++g)
      for (size_t i = 0; i < opt.param_groups()[g].params.size(); ++i) opt.restore_state(g, i, false);
    opt.set_steps_taken(0);  // a resume's optimizer has not stepped: the load reads the parameters in place
    memory::release_cached();
    ::malloc_trim(0);
  };
  checkpoint::TrainingState state;
  state.model = sharded.get();
  state.optimizer = &opt;
  state.config = &config;
  state.position = {1, 0, 1};

  // This rank's shard file: its pieces (f32) and one f32 tensor per optimizer state name each.
  int64_t shard_elements = 0;
  for (const auto& piece : sharded->parameter_pieces()) shard_elements += piece.master.numel();
  const int64_t shard_bytes = shard_elements * 4 * static_cast<int64_t>(1 + opt.state_names().size());

  const double crc_gbs = crc32_gbps();
  say("CRC-32 (ISA-L), one thread per rank, every rank at once: %.2f GB/s per rank\n", crc_gbs);

  // Every measurement `repeats` times, interleaved (raw, sharded save, sharded load, raw, full
  // save, full load, then again), keeping the best of each: on a VM the host takes back memory
  // the guest frees (free page reporting), so a write that fills the page cache can pay for
  // faulting that memory back in — 2-3x its time on this machine. The noise only ever adds time.
  // The ceiling is measured both before and after the sharded save in each round (the best of
  // 2 x repeats), so neither place favours the save. Each checkpoint is removed once loaded.
  //   raw: every rank write()s + fsync()s as many bytes as its shard file, all at once;
  //   sharded: save_state / load_state with SHARDED_STATE_DICT;
  //   full: FULL_STATE_DICT (rank 0 writes model.safetensors, one unit gathered at a time),
  //         with rank 0's allocator peak around it.
  double raw_total = 0;
  for (double b : gather(static_cast<double>(shard_bytes))) raw_total += b;
  const fs::path sharded_dir = work_dir / "sharded", full_dir = work_dir / "full";
  Config full_config = config;
  full_config.dist.fsdp.state_dict_type = StateDictType::FULL_STATE_DICT;
  checkpoint::TrainingState full_state = state;
  full_state.config = &full_config;
  auto best = [](std::vector<double>& v, double x) {
    v.push_back(x);
    return *std::min_element(v.begin(), v.end());
  };
  std::vector<double> raw_s, sharded_save_all, sharded_load_all, full_save_all, full_load_all, async_blocked_all,
      async_total_all, step_all, async_slower_all, sharded_cold_load_all, raw_read_all,
      raw_cold_read_all, raw_cold_read_new_all;
  Pairs warm, idle;  // FULL loads from the disk beside raw reads, just after a read / after a pause
  const fs::path async_root = work_dir / "async";
  RawWrite raw;
  double sharded_bytes = 0, full_bytes = 0;
  Extra save_extra, load_extra;
  // One measurement of the ceilings, each figure added to its best-of list.
  auto measure_raw = [&] {
    const RawWrite r = raw_write(work_dir, shard_bytes);
    if (best(raw_s, r.seconds) == r.seconds) raw = r;
    best(raw_read_all, r.read_seconds);
    best(raw_cold_read_all, r.cold_read_seconds);
    best(raw_cold_read_new_all, r.cold_read_new_seconds);
    return r;
  };
  // The FULL checkpoint's files (of the round's save), each rank's share of them read raw or
  // checked after they were dropped from the page cache, and a load of them from the disk.
  std::vector<fs::path> files;
  auto share_read = [&](const char* what, auto read_share) {
    drop_from_page_cache(full_dir);
    return timed_on_all(what, [&] { read_share(files, group.rank(), group.size(), runtime::num_threads()); });
  };
  auto paired_raw_read = [&] { return share_read("raw read", bench::raw_read_share); };
  // What a load cannot skip: the same bytes read and summed.
  auto paired_checked_read = [&] { return share_read("checked read", bench::checked_read_share); };
  auto cold_load = [&] {
    drop_from_page_cache(full_dir);
    forget_optimizer_state();
    return timed([&] { checkpoint::load_state(full_dir, full_state); });
  };
  // Warm pairs alone (below), for a quick comparison of changes to the load: one FULL save, then
  // --load-pairs rounds of raw read, load, load, raw read; printed, no results written.
  if (load_pairs > 0) {
    checkpoint::save_state(full_dir, full_state);
    files = files_under(full_dir);
    Pairs quick;
    paired_raw_read();
    for (int i = 0; i < load_pairs; ++i) {
      const double raw_a = paired_raw_read(), load_a = cold_load();
      const double load_b = cold_load(), raw_b = paired_raw_read();
      quick.add(raw_a, load_a);
      quick.add(raw_b, load_b);
      say("raw read %.3f s, load %.3f s; load %.3f s, raw read %.3f s\n", raw_a, load_a, load_b, raw_b);
    }
    say("FULL loads from the warm disk: best %.3f s, median %.3f s; raw reads best %.3f s; the load at %.2fx the "
        "raw read's speed (median of %zu pairs; worst %.2fx)\n",
        quick.best_load(), median(quick.load_s), quick.best_raw(), quick.median_ratio(), quick.ratio.size(),
        quick.worst_ratio());
    return 0;
  }
  for (int round = 0; round < repeats; ++round) {
    const RawWrite r = measure_raw();
    say("round %d: raw %.2f s (write() %.2f + fsync %.2f)", round + 1, r.seconds, r.write_seconds,
        r.fsync_seconds);

    const double ss = timed([&] { checkpoint::save_state(sharded_dir, state); });
    best(sharded_save_all, ss);
    sharded_bytes = static_cast<double>(main_rank ? bytes_under(sharded_dir) : 0);
    forget_optimizer_state();
    const double sl = timed([&] { checkpoint::load_state(sharded_dir, state); });
    best(sharded_load_all, sl);
    drop_from_page_cache(sharded_dir);
    forget_optimizer_state();
    const double slc = timed([&] { checkpoint::load_state(sharded_dir, state); });
    best(sharded_cold_load_all, slc);
    if (main_rank) fs::remove_all(sharded_dir);
    say(", sharded save %.2f load %.2f (from disk %.2f)", ss, sl, slc);
    // Asynchronous: a training step without a save, then save_async and the same step; the
    // write goes on behind the second.
    const double step = best(step_all, timed(train_step));
    double returned = 0, waited = 0;
    const double with_save = timed([&] {
      const auto t0 = clock_type::now();
      checkpoint::save_async(async_root, state);
      returned = seconds_since(t0);
      profiler::reset();
      profiler::enable(true);
      train_step();
      profiler::enable(false);
      for (const auto& e : profiler::snapshot())
        if (e.name == "checkpoint.wait") waited = e.seconds;
    });
    const double committed = timed([&] { checkpoint::finish_saves(); });
    const double blocked = max_over_ranks(returned + waited);
    best(async_blocked_all, blocked);
    best(async_slower_all, with_save - step);
    best(async_total_all, with_save + committed);
    if (main_rank) fs::remove_all(async_root);
    say(", async blocks %.2f (the step took %.2f s more than %.2f; committed %.2f later)", blocked,
        with_save - step, step, committed);
    // The ceiling again, now in the sharded save's place (right after a checkpoint's removal).
    const RawWrite r2 = measure_raw();
    say(", raw %.2f (%.2f + %.2f)", r2.seconds, r2.write_seconds, r2.fsync_seconds);

    Extra se, le;
    const double fsave = timed([&] { se = peak_extra([&] { checkpoint::save_state(full_dir, full_state); }); });
    best(full_save_all, fsave);
    full_bytes = static_cast<double>(main_rank ? bytes_under(full_dir) : 0);
    forget_optimizer_state();
    const double fload = timed([&] { le = peak_extra([&] { checkpoint::load_state(full_dir, full_state); }); });
    best(full_load_all, fload);
    // From the disk, each load paired with a raw read of the same files: raw then load, load
    // then raw. This host's cache serves a file read a moment ago at ~5-6 GB/s, where the load's
    // own work shows most ("warm": each pair after an untimed read of the files), and one left
    // alone for a few seconds sometimes at ~1 GB/s, as a resume in a new job would meet it
    // ("idle": each side after a pause of kIdle, every rank quiet).
    files = files_under(full_dir);
    auto pause = [&] {
      group.barrier();
      std::this_thread::sleep_for(kIdle);
      group.barrier();
    };
    // The checked reads go outside the pairs, so that each raw read stays next to its load.
    paired_raw_read();
    const double checked_a = paired_checked_read(), raw_a = paired_raw_read(), load_a = cold_load();
    paired_raw_read();
    const double load_b = cold_load(), raw_b = paired_raw_read(), checked_b = paired_checked_read();
    warm.add(raw_a, load_a);
    warm.add(raw_b, load_b);
    warm.add_checked(raw_a, checked_a);
    warm.add_checked(raw_b, checked_b);
    pause();
    const double idle_raw_a = paired_raw_read();
    pause();
    const double idle_load_a = cold_load();
    pause();
    const double idle_load_b = cold_load();
    pause();
    const double idle_raw_b = paired_raw_read();
    idle.add(idle_raw_a, idle_load_a);
    idle.add(idle_raw_b, idle_load_b);
    if (main_rank) fs::remove_all(full_dir);
    save_extra = se.total >= save_extra.total ? se : save_extra;  // the worst round's
    load_extra = le.total >= load_extra.total ? le : load_extra;
    say(", full save %.2f load %.2f (from disk, raw read then load and load then raw read: warm %.2f %.2f, "
        "%.2f %.2f; idle %.2f %.2f, %.2f %.2f)\n",
        fsave, fload, raw_a, load_a, load_b, raw_b, idle_raw_a, idle_load_a, idle_load_b, idle_raw_b);
  }
  const double raw_gbs = raw_total / raw.seconds / 1e9;
  const double sharded_save_s = *std::min_element(sharded_save_all.begin(), sharded_save_all.end());
  const double sharded_load_s = *std::min_element(sharded_load_all.begin(), sharded_load_all.end());
  const double full_save_s = *std::min_element(full_save_all.begin(), full_save_all.end());
  const double full_load_s = *std::min_element(full_load_all.begin(), full_load_all.end());
  const double sharded_gbs = sharded_bytes / sharded_save_s / 1e9;
  say("best of %d (raw: of %d): raw write %.2f GB in %.2f s = %.2f GB/s (write() %.2f s, fsync %.2f s, slowest rank)\n",
      repeats, 2 * repeats, raw_total / 1e9, raw.seconds, raw_gbs, raw.write_seconds, raw.fsync_seconds);
  say("  sharded save: %.2f GB in %.2f s = %.2f GB/s, %.2fx raw; load %.2f s = %.2f GB/s\n",
      sharded_bytes / 1e9, sharded_save_s, sharded_gbs, sharded_gbs / raw_gbs, sharded_load_s,
      sharded_bytes / sharded_load_s / 1e9);
  const double async_blocked_s = *std::min_element(async_blocked_all.begin(), async_blocked_all.end());
  const double async_total_s = *std::min_element(async_total_all.begin(), async_total_all.end());
  const double step_s = *std::min_element(step_all.begin(), step_all.end());
  const double async_slower_s = *std::min_element(async_slower_all.begin(), async_slower_all.end());
  say("  async save: blocks the next step %.3f s = %.3fx the sharded save; that step took %.2f s more than "
      "%.2f s; written and committed %.2f s after it began\n",
      async_blocked_s, async_blocked_s / sharded_save_s, async_slower_s, step_s, async_total_s);
  // What of the full save is gathering: the same unit-by-unit all_gather, nothing written.
  const double gather_s = timed([&] { sharded->visit_full_parameters([](const auto&) {}); });
  const double raw_read_s = *std::min_element(raw_read_all.begin(), raw_read_all.end());
  const double raw_cold_read_s = *std::min_element(raw_cold_read_all.begin(), raw_cold_read_all.end());
  const double raw_cold_read_new_s = *std::min_element(raw_cold_read_new_all.begin(), raw_cold_read_new_all.end());
  const double sharded_cold_load_s = *std::min_element(sharded_cold_load_all.begin(), sharded_cold_load_all.end());
  say("  full save: %.2f GB in %.2f s = %.2f GB/s (gathering the units alone: %.2f s)\n", full_bytes / 1e9,
      full_save_s, full_bytes / full_save_s / 1e9, gather_s);
  say("  loads from the page cache: full %.2f s, sharded %.2f s; raw read %.2f s: full at %.2fx its speed\n",
      full_load_s, sharded_load_s, raw_read_s, raw_read_s / full_load_s);
  auto show = [&](const char* what, const Pairs& p) {
    say("  FULL loads from the disk (%s): best %.2f s; a raw read of the same files beside each: best %.2f s, the "
        "load at %.2fx its speed (median of %zu pairs; worst %.2fx)\n",
        what, p.best_load(), p.best_raw(), p.median_ratio(), p.ratio.size(), p.worst_ratio());
  };
  say("  sharded load from the disk %.2f s\n", sharded_cold_load_s);
  show("warm", warm);
  say("    beside them a checked read (the same reads, each summed with CRC-32: the reading and checking a load "
      "cannot skip): best %.2f s, at %.2fx the raw read's speed (median)\n",
      warm.best_checked(), warm.median_checked_ratio());
  show("idle", idle);
  say("  the raw file read from the disk right after it was written: %.2f s; into new memory %.2f s\n", raw_cold_read_s,
      raw_cold_read_new_s);
  auto categories = [](const Extra& e) {
    std::string s;
    for (const auto& [c, b] : e.by_category) s += " " + c + " " + bench_format("%.1f", mb(b)) + " MB";
    return s;
  };
  say("rank 0 peak extra memory: full save %.1f MB (%s ), full load %.1f MB (%s ); largest unit %.1f MB\n",
      mb(save_extra.total), categories(save_extra).c_str(), mb(load_extra.total),
      categories(load_extra).c_str(), mb(unit_bytes));

  if (!main_rank) return 0;
  Poco::JSON::Object::Ptr r = new Poco::JSON::Object;
  r->set("cpu", bench::cpu_model());
  r->set("model", model_name);
  r->set("ranks", group.size());
  r->set("threads_per_rank", runtime::num_threads());
  r->set("params", params);
  r->set("crc32_gbs", crc_gbs);
  r->set("raw_write_gbs", raw_gbs);
  r->set("raw_write_s", raw.seconds);
  r->set("raw_fsync_s", raw.fsync_seconds);
  r->set("repeats", repeats);
  r->set("raw_write_s_all", json_array(raw_s));
  r->set("sharded_save_s_all", json_array(sharded_save_all));
  r->set("full_save_s_all", json_array(full_save_all));
  r->set("async_blocked_s_all", json_array(async_blocked_all));
  r->set("async_blocked_s", async_blocked_s);
  r->set("async_blocked_vs_sync", async_blocked_s / sharded_save_s);
  r->set("async_total_s", async_total_s);
  r->set("async_step_slower_s", async_slower_s);
  r->set("step_s", step_s);
  r->set("raw_read_s", raw_read_s);
  r->set("full_load_vs_raw_read", raw_read_s / full_load_s);
  r->set("sharded_load_from_disk_s", sharded_cold_load_s);
  warm.report(*r, "warm");
  idle.report(*r, "idle");
  r->set("raw_read_from_disk_s", raw_cold_read_s);
  r->set("raw_read_into_new_memory_from_disk_s", raw_cold_read_new_s);
  r->set("sharded_bytes", sharded_bytes);
  r->set("sharded_save_s", sharded_save_s);
  r->set("sharded_save_gbs", sharded_gbs);
  r->set("sharded_save_vs_raw", sharded_gbs / raw_gbs);
  r->set("sharded_load_s", sharded_load_s);
  r->set("full_bytes", full_bytes);
  r->set("full_save_s", full_save_s);
  r->set("full_gather_s", gather_s);
  r->set("full_load_s", full_load_s);
  r->set("full_save_peak_extra_mb", mb(save_extra.total));
  r->set("full_load_peak_extra_mb", mb(load_extra.total));
  r->set("largest_unit_mb", mb(unit_bytes));
  r->set("full_peak_vs_unit", static_cast<double>(save_extra.total) / static_cast<double>(unit_bytes));
  auto runs = merge_results(out, r);
  write_results(out, runs);
  std::printf("\nCPU: %s; checkpoints in %s (removed)\n"
              "save times include fsync; loads likely hit the page cache (memory/CRC-bound)\n",
              bench::cpu_model().c_str(), work.c_str());
  print_table(runs);
  std::printf("results written to %s\n", out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  acc::Session session(argc, argv);
  return acc::train::run_program("bench_checkpoint", [&] { return run(argc, argv); });
}
