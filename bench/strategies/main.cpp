// bench_strategies: GPT-2 training steps through acc::accelerate with every FSDP setting, f32
// and bf16: tokens/s of the whole job and per-rank memory by category. Run it alone for the
// single-process baseline, then under mpirun with that baseline: run.sh does both and writes
// bench/results/strategies.json.
//   bench_strategies [--model small|tiny] [--batch 8] [--seq 512] [--steps 2]
//                    [--baseline-f32 TOK/S --baseline-bf16 TOK/S] [--out FILE]
//                    [--offload-dir DIR (default bench/results/offload)]
// Ceilings: tokens/s against the single process (2 threads) on the same global batch (target
// FULL_SHARD >= 0.9x); model-state memory (parameters + gradients + optimizer state) per rank
// against NO_SHARD's in the same run (target FULL_SHARD <= 0.55x at 2 ranks); FULL_SHARD with
// forward and backward prefetch against the single process (target >= 0.95x), with its
// communication per step, exposed and in all; FULL_SHARD with fsdp_offload_params (compute
// tier's peak against FULL_SHARD's whole peak) and with fsdp_offload_dir (peak resident memory
// per rank against FULL_SHARD's: target a fall of at least 0.8x the optimizer state).
#include <chrono>
#include <cstdio>

#include "acc/acc.h"
#include <filesystem>

#include "acc/memory/allocator.h"
#include "acc/memory/resident.h"
#include "acc/runtime/threads.h"
#include "acc/util/profiler.h"
#include "acc/train/cli.h"
#include "support/measure.h"
#include "support/random_tokens.h"

namespace {

using namespace acc;

using bench::RandomTokens;

struct Result {
  double tokens_per_s;
  memory::Report peaks;  // of the timed steps, this rank
  // Per step, this rank (ACC_PROFILE's marks): all communication time, and the part compute
  // did not hide (time the rank waited for a collective).
  double comm_s = 0, exposed_comm_s = 0;
  int64_t peak_resident = 0;  // VmHWM over the whole case, wrapping included, less VmRSS before
  int64_t optimizer_state = 0;  // this rank's AdamW state, bytes
};

double profiled_seconds(const char* name) {
  for (const auto& e : profiler::snapshot())
    if (e.name == name) return e.seconds;
  return 0;
}

Result run_case(const models::GPT2Config& gpt, const Config& config, int64_t batch, int64_t seq,
                int64_t steps) {
  const int64_t resident_before = memory::begin_resident_phase();
  data::DataLoader loader(std::make_shared<RandomTokens>((steps + 1) * batch, seq, gpt.vocab_size),
                          {.batch_size = batch, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(make_model<models::GPT2>(config, gpt, 0), loader, config);
  optim::AdamW opt(sharded->param_groups(0.1), {.lr = 1e-4});
  auto step = [&](const data::Batch& b) {
    opt.zero_grad();
    sharded->forward(b).loss.backward();
    sharded->clip_grad_norm(1.0);
    opt.step();
  };
  auto it = rank_loader.begin();
  step(*it);  // warm-up: primitive creation, first-touch pages
  ++it;
  world().barrier();
  memory::reset_peaks();
  profiler::reset();
  profiler::enable(true);
  const auto start = std::chrono::steady_clock::now();
  for (; it != rank_loader.end(); ++it) step(*it);
  profiler::enable(false);  // before the barrier, which is no step's
  world().barrier();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto n = static_cast<double>(steps);
  int64_t state = 0;
  for (const Tensor& p : sharded->parameters()) state += 2 * 4 * p.numel();
  return {static_cast<double>(steps * batch * seq) / s, memory::report(),
          profiled_seconds("comm.collective") / n, profiled_seconds("comm.wait") / n,
          memory::peak_resident_bytes() - resident_before, state};
}

Config fsdp_config(const std::string& strategy, bool bf16) {
  Config config;
  config.dist.distributed_type = DistributedType::FSDP;
  config.dist.fsdp.sharding_strategy = parse_sharding_strategy(strategy, "strategy");
  config.dist.fsdp.wrap_layer_cls = {"GPT2Block"};
  config.compute.bf16 = bf16;
  return config;
}

double megabytes(int64_t bytes) { return static_cast<double>(bytes) / 1e6; }

int run(int argc, char** argv) {
  train::Args args(argc, argv);
  const std::string model = args.get("model", "small");
  const int64_t batch = args.get_int("batch", 8), seq = args.get_int("seq", 512);
  const int64_t steps = args.get_int("steps", 2);
  const double base_f32 = args.get_double("baseline-f32", 0), base_bf16 = args.get_double("baseline-bf16", 0);
  const std::string out = args.get("out", world().size() == 1 ? "bench/results/strategies_single.json"
                                                              : "bench/results/strategies.json");
  const std::string offload_dir = args.get("offload-dir", "bench/results/offload");
  args.finish();
  std::filesystem::create_directories(offload_dir);
  models::GPT2Config gpt = models::GPT2Config::from_name_or_file(model);
  gpt.n_positions = std::max(gpt.n_positions, seq);

  const std::vector<std::string> strategies =
      world().size() == 1 ? std::vector<std::string>{"NO_SHARD"}
                          : std::vector<std::string>{"NO_SHARD", "FULL_SHARD", "SHARD_GRAD_OP",
                                                     "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"};
  std::vector<bench::Row> rows;
  for (bool bf16 : {false, true}) {
    const char* dt = bf16 ? "bf16" : "f32";
    const double baseline = bf16 ? base_bf16 : base_f32;
    double no_shard_state = 0;
    Result full_shard{};
    for (const auto& name : strategies) {
      const Result r = run_case(gpt, fsdp_config(name, bf16), batch, seq, steps);
      using memory::Category;
      const double state = megabytes(r.peaks[Category::parameters].peak +
                                     r.peaks[Category::gradients].peak +
                                     r.peaks[Category::optimizer_state].peak);
      if (name == "NO_SHARD") no_shard_state = state;
      const std::string label = name + " " + dt;
      const bool full = name == "FULL_SHARD";
      rows.push_back({label + " tokens/s", "tok/s", r.tokens_per_s, baseline,
                      "one process, 2 threads", full && baseline > 0 ? 0.9 : 0.0});
      rows.push_back({label + " model state/rank", "MB", state, no_shard_state, "NO_SHARD",
                      full && world().size() == 2 ? 0.55 : 0.0});
      for (auto c : {Category::parameters, Category::gradients, Category::optimizer_state,
                     Category::activations, Category::communication})
        rows.push_back({label + " peak " + std::string(memory::category_name(c)), "MB",
                        megabytes(r.peaks[c].peak), 0, "", 0});
      if (world().rank() == 0) std::printf("%s: %.1f tokens/s\n", label.c_str(), r.tokens_per_s);
      std::fflush(stdout);
      if (full) full_shard = r;
    }
    if (world().size() == 1) continue;
    // FULL_SHARD's prefetch settings (the rows above use the default, BACKWARD_PRE): tokens/s
    // against the single process, and communication per step, exposed next to all of it.
    for (const auto& [setting, forward, backward] :
         {std::tuple{"NO_PREFETCH", false, BackwardPrefetch::NO_PREFETCH},
          std::tuple{"BACKWARD_PRE", false, BackwardPrefetch::BACKWARD_PRE},
          std::tuple{"BACKWARD_PRE+forward", true, BackwardPrefetch::BACKWARD_PRE}}) {
      Config config = fsdp_config("FULL_SHARD", bf16);
      config.dist.fsdp.forward_prefetch = forward;
      config.dist.fsdp.backward_prefetch = backward;
      const Result p = run_case(gpt, config, batch, seq, steps);
      const std::string label = std::string("FULL_SHARD ") + setting + " " + dt;
      rows.push_back({label + " tokens/s", "tok/s", p.tokens_per_s, baseline, "one process, 2 threads",
                      forward && baseline > 0 ? 0.95 : 0.0});
      rows.push_back({label + " exposed comm/step", "ms", 1e3 * p.exposed_comm_s, 1e3 * p.comm_s,
                      "all comm/step", 0});
      if (world().rank() == 0)
        std::printf("%s: %.1f tokens/s, communication %.0f ms/step of which exposed %.0f ms\n",
                    label.c_str(), p.tokens_per_s, 1e3 * p.comm_s, 1e3 * p.exposed_comm_s);
    }
    // FULL_SHARD with activation checkpointing, against FULL_SHARD without it.
    Config config = fsdp_config("FULL_SHARD", bf16);
    config.dist.fsdp.activation_checkpointing = true;
    const Result r = run_case(gpt, config, batch, seq, steps);
    const std::string label = std::string("FULL_SHARD+checkpointing ") + dt;
    rows.push_back({label + " tokens/s", "tok/s", r.tokens_per_s, full_shard.tokens_per_s,
                    "FULL_SHARD", 1 / 1.4});
    rows.push_back({label + " peak activations", "MB", megabytes(r.peaks[memory::Category::activations].peak),
                    megabytes(full_shard.peaks[memory::Category::activations].peak), "FULL_SHARD", 0.35});
    if (world().rank() == 0) std::printf("%s: %.1f tokens/s\n", label.c_str(), r.tokens_per_s);

    // Offload, against FULL_SHARD: what the compute tier still holds, and what files save.
    const double full_peak = megabytes(full_shard.peaks.total.peak);
    const double full_rss = megabytes(full_shard.peak_resident);
    for (const bool to_files : {false, true}) {
      Config offload = fsdp_config("FULL_SHARD", bf16);
      offload.dist.fsdp.offload_params = true;
      offload.dist.fsdp.cpu_ram_efficient_loading = true;
      if (to_files) offload.dist.fsdp.offload_dir = offload_dir;
      const Result o = run_case(gpt, offload, batch, seq, steps);
      const std::string name = std::string(to_files ? "FULL_SHARD+offload_dir " : "FULL_SHARD+offload ") + dt;
      rows.push_back({name + " tokens/s", "tok/s", o.tokens_per_s, full_shard.tokens_per_s, "FULL_SHARD", 0});
      rows.push_back({name + " compute-tier peak", "MB", megabytes(o.peaks[memory::Tier::compute].peak),
                      full_peak, "FULL_SHARD, all tiers", 0});
      rows.push_back({name + " peak RSS growth/rank", "MB", megabytes(o.peak_resident), full_rss, "FULL_SHARD", 0});
      if (to_files)  // the fall in resident memory, against the optimizer state (target >= 0.8x)
        rows.push_back({name + " RSS saved/rank", "MB saved", full_rss - megabytes(o.peak_resident),
                        megabytes(o.optimizer_state), "optimizer state", 0.8});
      if (world().rank() == 0)
        std::printf("%s: %.1f tokens/s, compute tier peak %.0f MB, peak RSS growth %.0f MB (FULL_SHARD %.0f MB)\n",
                    name.c_str(), o.tokens_per_s, megabytes(o.peaks[memory::Tier::compute].peak),
                    megabytes(o.peak_resident), full_rss);
    }
  }
  if (world().rank() == 0)
    bench::report("GPT-2 " + model + " through acc::accelerate, global batch " +
                      std::to_string(batch) + " x " + std::to_string(seq) + ", " +
                      std::to_string(world().size()) + " ranks x " +
                      std::to_string(runtime::num_threads()) + " threads",
                  rows, out, {{"cpu", bench::cpu_model()}, {"ranks", std::to_string(world().size())}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  acc::Session session(argc, argv);
  return acc::train::run_program("bench_strategies", [&] { return run(argc, argv); });
}
