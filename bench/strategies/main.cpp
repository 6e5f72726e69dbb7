// bench_strategies: GPT-2 training steps through acc::accelerate with every FSDP setting, f32
// and bf16: tokens/s of the whole job and per-rank memory by category. Run it alone for the
// single-process baseline, then under mpirun with that baseline: run.sh does both and writes
// bench/results/strategies.json.
//   bench_strategies [--model small|tiny] [--batch 8] [--seq 512] [--steps 2]
//                    [--baseline-f32 TOK/S --baseline-bf16 TOK/S] [--out FILE]
//                    [--offload-dir DIR (default bench/results/offload)] [--rss-budget MB]
//                    [--cases strategies,prefetch,buckets,checkpointing,offload,spmd (default
//                    these), levers (4 ranks as 2 nodes: levers.sh, link_sweep.sh),
//                    pipeline (pipeline.sh, pipeline_link.sh)] [--schedules 1F1B,GPipe,interleaved_1F1B,zero_bubble (pipeline: which,
//                    in order; interleaved with 2 chunks per rank)] [--split-points auto|NAMES
//                    (pipeline_config.split_points of the pipeline cases; default auto)]
//                    [--precision both|f32|bf16 (default both)]
//                    [--levers plain,hybrid,node_copies,int8_gathers,int8_gradients,all (default all)]
//                    [--rounds R (levers: each runs R times in turn, the median is kept)]
// Ceilings: tokens/s against the single process (2 threads) on the same global batch (target
// FULL_SHARD >= 0.9x); model-state memory (parameters + gradients + optimizer state) per rank
// against NO_SHARD's in the same run (target FULL_SHARD <= 0.55x at 2 ranks); FULL_SHARD with
// forward and backward prefetch against the single process (target >= 0.95x), with its
// communication per step, exposed and in all; FULL_SHARD's gradient bucket sizes with their
// reduce-scatters per step; the levers for many machines (node copies, int8 gathers and
// gradients) with the bytes each sends across nodes; FULL_SHARD with fsdp_offload_params (compute
// tier's peak against FULL_SHARD's whole peak) and with fsdp_offload_dir (peak resident memory
// per rank against FULL_SHARD's: target a fall of at least 0.8x the optimizer state); PIPELINE's
// schedules against FULL_SHARD (tokens/s, memory, bytes across nodes, each rank's bubble, also
// against the schedule run at the stages' measured times).
// With --rss-budget only the model that should not fit is run (medium.sh: GPT-2 medium on 4
// ranks): FULL_SHARD bf16 with every memory lever, its highest per-rank peak resident memory
// against the budget, next to plain FULL_SHARD.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "acc/acc.h"
#include <filesystem>

#include "acc/distributed/traffic.h"
#include "acc/memory/allocator.h"
#include "acc/memory/resident.h"
#include "acc/runtime/threads.h"
#include "acc/util/profiler.h"
#include "acc/train/cli.h"
#include "support/measure.h"
#include "support/random_tokens.h"
#include "pipeline/schedule.h"

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
  int64_t resident_before = 0;  // VmRSS before the case: the runtime's own
  int64_t optimizer_state = 0;  // this rank's AdamW state, bytes
  double node_mb = 0, cross_node_mb = 0;  // per step, this rank's collectives (dist::traffic)
  double reduce_scatters = 0;             // per step, this rank's calls
  double pipeline_schedule_s = 0, pipeline_compute_s = 0;  // per step: a stage's schedule, its computing
  pipeline::StageTimes pipeline_times;  // per step, this rank's forwards, backwards and weight parts
};

double profiled_seconds(const char* name) {
  for (const auto& e : profiler::snapshot())
    if (e.name == name) return e.seconds;
  return 0;
}

// Steps before the timed ones: the first builds the primitives and touches the pages; its
// optimizer step then takes AdamW's state from the blocks the allocator kept, so the second
// step's gradients still come from fresh pages (at 2 ranks its first backward faulted ~120 MB,
// ~50 ms on each rank). From the third on a step reuses everything.
constexpr int kWarmUpSteps = 2;

Result run_case(const models::GPT2Config& gpt, const Config& config, int64_t batch, int64_t seq,
                int64_t steps) {
  const int64_t resident_before = memory::begin_resident_phase();
  data::DataLoader loader(std::make_shared<RandomTokens>((steps + kWarmUpSteps) * batch, seq, gpt.vocab_size),
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
  for (int i = 0; i < kWarmUpSteps; ++i, ++it) step(*it);
  world().barrier();
  memory::reset_peaks();
  profiler::reset();
  profiler::enable(true);
  dist::reset_traffic();
  const auto start = std::chrono::steady_clock::now();
  for (; it != rank_loader.end(); ++it) step(*it);
  profiler::enable(false);  // before the barrier, which is no step's
  const dist::Traffic sent = dist::traffic();
  world().barrier();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto n = static_cast<double>(steps);
  int64_t state = 0;
  for (const Tensor& p : sharded->parameters()) state += 2 * 4 * p.numel();
  return {static_cast<double>(steps * batch * seq) / s, memory::report(),
          profiled_seconds("comm.collective") / n, profiled_seconds("comm.wait") / n,
          memory::peak_resident_bytes() - resident_before, resident_before, state,
          static_cast<double>(sent.total_bytes(dist::Span::node)) / 1e6 / n,
          static_cast<double>(sent.total_bytes(dist::Span::cross_node)) / 1e6 / n,
          static_cast<double>(sent.calls_of(dist::TrafficKind::reduce_scatter)) / n,
          profiled_seconds("pipeline.schedule") / n, profiled_seconds("pipeline.compute") / n,
          {profiled_seconds("pipeline.forward") / n, profiled_seconds("pipeline.backward") / n,
           profiled_seconds("pipeline.weight") / n}};
}

Config fsdp_config(const std::string& strategy, bool bf16) {
  Config config;
  config.dist.distributed_type = DistributedType::FSDP;
  config.dist.fsdp.sharding_strategy = parse_sharding_strategy(strategy, "strategy");
  config.dist.fsdp.wrap_layer_cls = {"GPT2Block"};
  config.compute.bf16 = bf16;
  return config;
}

// SPMD on `mesh` (fsdp, model) over GPT-2's blocks; `rules` under configs/sharding/, or none
// for FSDPv2's default.
Config spmd_config(std::vector<int> mesh, const std::string& rules, bool bf16) {
  Config config = fsdp_config("FULL_SHARD", bf16);
  config.dist.distributed_type = DistributedType::SPMD;
  config.dist.spmd.mesh_shape = std::move(mesh);
  config.dist.spmd.axis_names = {"fsdp", "model"};
  config.dist.spmd.sharding_rules = rules.empty() ? "" : "configs/sharding/" + rules;
  return config;
}

double megabytes(int64_t bytes) { return static_cast<double>(bytes) / 1e6; }

// Peak parameters + gradients + optimizer state per rank, in MB.
double model_state_mb(const Result& r) {
  using memory::Category;
  return megabytes(r.peaks[Category::parameters].peak + r.peaks[Category::gradients].peak +
                   r.peaks[Category::optimizer_state].peak);
}

double sum_over_ranks(double value) {
  Tensor t = Tensor::from_vector({static_cast<float>(value)}, {1});
  world().all_reduce(t);
  return static_cast<double>(t.item());
}

// Every rank's value, in rank order, on every rank.
std::vector<float> every_rank(double value) {
  std::vector<float> all(static_cast<size_t>(world().size()), 0.f);
  all[static_cast<size_t>(world().rank())] = static_cast<float>(value);
  Tensor t = Tensor::from_vector(all, {world().size()});
  world().all_reduce(t);
  return t.to_vector();
}

double highest_over_ranks(double value) { return std::ranges::max(every_rank(value)); }

// FULL_SHARD bf16 with activation checkpointing, files for the masters and optimizer state,
// and deferred initialisation (no rank ever holds the whole model), against plain FULL_SHARD
// (deferred too): tokens/s, and the highest rank's peak resident memory, runtime included,
// against the budget.
std::vector<bench::Row> budget_rows(const models::GPT2Config& gpt, int64_t batch, int64_t seq,
                                    int64_t steps, double budget_mb, const std::string& offload_dir) {
  Config plain = fsdp_config("FULL_SHARD", true);
  plain.dist.fsdp.cpu_ram_efficient_loading = true;
  Config lean = plain;
  lean.dist.fsdp.activation_checkpointing = true;
  lean.dist.fsdp.offload_params = true;
  lean.dist.fsdp.offload_dir = offload_dir;
  std::vector<bench::Row> rows;
  Result results[2];
  for (int i : {0, 1}) {
    results[i] = run_case(gpt, i == 0 ? lean : plain, batch, seq, steps);
    const Result& r = results[i];
    const std::string label = i == 0 ? "FULL_SHARD+checkpointing+offload_dir bf16" : "FULL_SHARD bf16";
    const double rss = highest_over_ranks(megabytes(r.resident_before + r.peak_resident));
    rows.push_back({label + " tokens/s", "tok/s", r.tokens_per_s, i == 0 ? 0 : results[0].tokens_per_s,
                    i == 0 ? "" : "with every lever", 0});
    rows.push_back({label + " peak RSS/rank (highest)", "MB", rss, budget_mb, "budget", i == 0 ? 1.0 : 0.0});
    rows.push_back({label + " compute-tier peak", "MB", megabytes(r.peaks[memory::Tier::compute].peak), 0, "", 0});
    if (world().rank() == 0)
      std::printf("%s: %.2f tokens/s, highest peak RSS per rank %.0f MB (budget %.0f MB)\n", label.c_str(),
                  r.tokens_per_s, rss, budget_mb);
    std::fflush(stdout);
  }
  return rows;
}

// One shape of GPT-2 on this job's ranks; each group of rows below appends to `rows`.
struct Bench {
  models::GPT2Config gpt;
  int64_t batch, seq, steps;
  std::string offload_dir;
  std::vector<bench::Row> rows;

  Result run(const Config& config) const { return run_case(gpt, config, batch, seq, steps); }

  // Every strategy: tokens/s against the single process, model state against NO_SHARD's, and
  // the peak of each category. Returns FULL_SHARD's result (the reference of the rows below).
  Result strategy_rows(const std::vector<std::string>& strategies, bool bf16, double baseline) {
    const std::string dt = bf16 ? "bf16" : "f32";
    double no_shard_state = 0;
    Result full_shard{};
    for (const auto& name : strategies) {
      const Result r = run(fsdp_config(name, bf16));
      using memory::Category;
      const double state = model_state_mb(r);
      if (name == "NO_SHARD") no_shard_state = state;
      const std::string label = name + " " + dt;
      const bool full = name == "FULL_SHARD";
      rows.push_back({label + " tokens/s", "tok/s", r.tokens_per_s, baseline, "one process, 2 threads",
                      full && baseline > 0 ? 0.9 : 0.0});
      rows.push_back({label + " model state/rank", "MB", state, no_shard_state, "NO_SHARD",
                      full && world().size() == 2 ? 0.55 : 0.0});
      for (auto c : {Category::parameters, Category::gradients, Category::optimizer_state,
                     Category::activations, Category::communication})
        rows.push_back({label + " peak " + std::string(memory::category_name(c)), "MB",
                        megabytes(r.peaks[c].peak), 0, "", 0});
      rows.push_back({label + " sent/step node-local", "MB", r.node_mb, 0, "", 0});
      rows.push_back({label + " sent/step cross-node", "MB", r.cross_node_mb, 0, "", 0});
      if (world().rank() == 0) std::printf("%s: %.1f tokens/s\n", label.c_str(), r.tokens_per_s);
      std::fflush(stdout);
      if (full) full_shard = r;
    }
    return full_shard;
  }

  // FULL_SHARD's prefetch settings (the strategy rows use the default, BACKWARD_PRE): tokens/s
  // against the single process, and communication per step, exposed next to all of it.
  void prefetch_rows(bool bf16, double baseline) {
    for (const auto& [setting, forward, backward] :
         {std::tuple{"NO_PREFETCH", false, BackwardPrefetch::NO_PREFETCH},
          std::tuple{"BACKWARD_PRE", false, BackwardPrefetch::BACKWARD_PRE},
          std::tuple{"BACKWARD_PRE+forward", true, BackwardPrefetch::BACKWARD_PRE}}) {
      Config config = fsdp_config("FULL_SHARD", bf16);
      config.dist.fsdp.forward_prefetch = forward;
      config.dist.fsdp.backward_prefetch = backward;
      const Result p = run(config);
      const std::string label = std::string("FULL_SHARD ") + setting + (bf16 ? " bf16" : " f32");
      rows.push_back({label + " tokens/s", "tok/s", p.tokens_per_s, baseline, "one process, 2 threads",
                      forward && baseline > 0 ? 0.95 : 0.0});
      rows.push_back({label + " exposed comm/step", "ms", 1e3 * p.exposed_comm_s, 1e3 * p.comm_s,
                      "all comm/step", 0});
      if (world().rank() == 0)
        std::printf("%s: %.1f tokens/s, communication %.0f ms/step of which exposed %.0f ms\n",
                    label.c_str(), p.tokens_per_s, 1e3 * p.comm_s, 1e3 * p.exposed_comm_s);
      std::fflush(stdout);
    }
  }

  // FULL_SHARD's gradient bucket sizes (fsdp_bucket_mb; 0: a unit's whole gradient in one):
  // tokens/s against the single process, reduce-scatters per step, exposed communication.
  void bucket_rows(bool bf16, double baseline) {
    for (const double mb : {0.25, 4.0, 25.0, 0.0}) {
      Config config = fsdp_config("FULL_SHARD", bf16);
      config.dist.fsdp.bucket_mb = mb;
      const Result p = run(config);
      char setting[64];
      std::snprintf(setting, sizeof setting, "FULL_SHARD fsdp_bucket_mb=%g %s", mb, bf16 ? "bf16" : "f32");
      const std::string label = setting;
      rows.push_back({label + " tokens/s", "tok/s", p.tokens_per_s, baseline, "one process, 2 threads", 0});
      rows.push_back({label + " reduce-scatters/step", "calls", p.reduce_scatters, 0, "", 0});
      rows.push_back({label + " exposed comm/step", "ms", 1e3 * p.exposed_comm_s, 1e3 * p.comm_s,
                      "all comm/step", 0});
      if (world().rank() == 0)
        std::printf("%s: %.1f tokens/s, %.0f reduce-scatters/step, communication %.0f ms/step of which "
                    "exposed %.0f ms\n",
                    label.c_str(), p.tokens_per_s, p.reduce_scatters, 1e3 * p.comm_s, 1e3 * p.exposed_comm_s);
      std::fflush(stdout);
    }
  }

  // The levers for many machines (run with ranks on more than one node, or ACC_RANKS_PER_NODE
  // simulating it): FULL_SHARD, HYBRID_SHARD, FULL_SHARD with node copies (hpZ), with int8
  // weight gathers (qwZ), with int8 gradient reductions (qgZ) and with all three; tokens/s,
  // exposed communication and bytes sent per step across nodes and within, each against plain
  // FULL_SHARD's.
  // `only`: the levers' keys to run (plain first if asked for: the others are against it).
  // `rounds`: every lever runs that many times, in turn, each round starting one lever later, so
  // that neither a slow spell of the machine nor a place in the order favours one; each row is
  // the run of median tokens/s,
  // and "spread" is (max - min) / median of a lever's tokens/s over the rounds: its noise.
  void lever_rows(bool bf16, const std::set<std::string>& only, int rounds) {
    struct Lever {
      const char* key;
      const char* name;
      const char* strategy;
      bool node_copies, int8_gathers, int8_gradients;
    };
    const Lever levers[] = {{"plain", "FULL_SHARD", "FULL_SHARD", false, false, false},
                            {"hybrid", "HYBRID_SHARD", "HYBRID_SHARD", false, false, false},
                            {"node_copies", "FULL_SHARD + node copies", "FULL_SHARD", true, false, false},
                            {"int8_gathers", "FULL_SHARD + int8 gathers", "FULL_SHARD", false, true, false},
                            {"int8_gradients", "FULL_SHARD + int8 gradients", "FULL_SHARD", false, false, true},
                            {"all", "FULL_SHARD + all three", "FULL_SHARD", true, true, true}};
    constexpr size_t kLevers = std::size(levers);
    for (const auto& key : only)
      ACC_CHECK(std::any_of(std::begin(levers), std::end(levers), [&](const Lever& l) { return key == l.key; }),
                "--levers: unknown lever '", key, "'; expected plain, hybrid, node_copies, int8_gathers, "
                "int8_gradients or all");
    auto selected = [&](const Lever& l) { return only.empty() || only.count(l.key); };
    std::vector<Result> runs[kLevers];
    for (int round = 0; round < rounds; ++round)
      for (size_t k = 0; k < kLevers; ++k) {
        const size_t i = (k + static_cast<size_t>(round)) % kLevers;  // each round starts elsewhere
        if (!selected(levers[i])) continue;
        Config config = fsdp_config(levers[i].strategy, bf16);
        config.dist.fsdp.reshard_to_node = levers[i].node_copies;
        config.dist.fsdp.quantize_weights = levers[i].int8_gathers;
        config.dist.fsdp.quantize_gradients = levers[i].int8_gradients ? 8 : 0;
        runs[i].push_back(run(config));
      }
    Result plain{};
    for (size_t i = 0; i < kLevers; ++i) {
      if (runs[i].empty()) continue;
      std::vector<Result>& all = runs[i];
      std::sort(all.begin(), all.end(), [](const Result& a, const Result& b) { return a.tokens_per_s < b.tokens_per_s; });
      const Result& r = all[all.size() / 2];
      const double spread = (all.back().tokens_per_s - all.front().tokens_per_s) / r.tokens_per_s;
      const bool first = i == 0;
      if (first) plain = r;  // when not run, the other rows have no ratio
      const std::string label = std::string(levers[i].name) + (bf16 ? " bf16" : " f32");
      rows.push_back({label + " tokens/s", "tok/s", r.tokens_per_s, first ? 0 : plain.tokens_per_s, "FULL_SHARD", 0});
      if (rounds > 1) rows.push_back({label + " tokens/s spread", "%", 100 * spread, 0, "", 0});
      rows.push_back({label + " exposed comm/step", "ms", 1e3 * r.exposed_comm_s, first ? 0 : 1e3 * plain.exposed_comm_s,
                      "FULL_SHARD", 0});
      rows.push_back({label + " sent/step cross-node", "MB", r.cross_node_mb, first ? 0 : plain.cross_node_mb,
                      "FULL_SHARD", 0});
      rows.push_back({label + " sent/step node-local", "MB", r.node_mb, 0, "", 0});
      if (world().rank() == 0)
        std::printf("%s: %.1f tokens/s (median of %d, spread %.0f%%), exposed communication %.0f ms/step, "
                    "sent/step %.1f MB across nodes, %.1f MB within\n",
                    label.c_str(), r.tokens_per_s, rounds, 100 * spread, 1e3 * r.exposed_comm_s, r.cross_node_mb,
                    r.node_mb);
      std::fflush(stdout);
    }
  }

  // FULL_SHARD with activation checkpointing, against FULL_SHARD without it.
  void checkpointing_rows(bool bf16, const Result& full_shard) {
    Config config = fsdp_config("FULL_SHARD", bf16);
    config.dist.fsdp.activation_checkpointing = true;
    const Result r = run(config);
    const std::string label = std::string("FULL_SHARD+checkpointing ") + (bf16 ? "bf16" : "f32");
    rows.push_back({label + " tokens/s", "tok/s", r.tokens_per_s, full_shard.tokens_per_s, "FULL_SHARD", 1 / 1.4});
    rows.push_back({label + " peak activations", "MB", megabytes(r.peaks[memory::Category::activations].peak),
                    megabytes(full_shard.peaks[memory::Category::activations].peak), "FULL_SHARD", 0.35});
    if (world().rank() == 0) std::printf("%s: %.1f tokens/s\n", label.c_str(), r.tokens_per_s);
    std::fflush(stdout);
  }

  // SPMD against FULL_SHARD on the same ranks: FSDPv2's default on mesh (N, 1) (target: within
  // 10% of FULL_SHARD's tokens/s and model state), and at 4 ranks fsdp x tensor parallel on
  // mesh (2, 2) with gpt2-fsdp-tp.yaml, then with the residual stream split between the layers
  // too, on the sequence (gpt2-fsdp-tp-sp.yaml) and on the hidden dim (gpt2-fsdp-tp-hidden.yaml):
  // their tokens/s and activation peaks against fsdp-tp's.
  void spmd_rows(bool bf16, const Result& full_shard) {
    const int n = world().size();
    std::vector<std::tuple<std::string, std::vector<int>, std::string, double>> meshes{
        {"SPMD (" + std::to_string(n) + ",1)", {n, 1}, "", 0.9}};
    if (n == 4) {
      meshes.emplace_back("SPMD (2,2) fsdp-tp", std::vector<int>{2, 2}, "gpt2-fsdp-tp.yaml", 0.0);
      meshes.emplace_back("SPMD (2,2) fsdp-tp-sp", std::vector<int>{2, 2}, "gpt2-fsdp-tp-sp.yaml", 0.0);
      meshes.emplace_back("SPMD (2,2) fsdp-tp-hidden", std::vector<int>{2, 2}, "gpt2-fsdp-tp-hidden.yaml", 0.0);
    }
    std::optional<Result> tensor_parallel;
    for (const auto& [name, mesh, rules, target] : meshes) {
      const Result r = run(spmd_config(mesh, rules, bf16));
      const std::string label = name + (bf16 ? " bf16" : " f32");
      rows.push_back({label + " tokens/s", "tok/s", r.tokens_per_s, full_shard.tokens_per_s, "FULL_SHARD", target});
      rows.push_back({label + " model state/rank", "MB", model_state_mb(r), model_state_mb(full_shard), "FULL_SHARD",
                      target > 0 ? 1.1 : 0.0});
      const double activations = megabytes(r.peaks[memory::Category::activations].peak);
      if (rules == "gpt2-fsdp-tp.yaml") tensor_parallel = r;
      if (rules != "gpt2-fsdp-tp.yaml" && tensor_parallel) {  // the residual stream split too
        rows.push_back({label + " tokens/s vs fsdp-tp", "tok/s", r.tokens_per_s, tensor_parallel->tokens_per_s,
                        "SPMD (2,2) fsdp-tp", 0.9});
        rows.push_back({label + " peak activations", "MB", activations,
                        megabytes(tensor_parallel->peaks[memory::Category::activations].peak), "SPMD (2,2) fsdp-tp", 0});
      }
      if (world().rank() == 0)
        std::printf("%s: %.1f tokens/s (FULL_SHARD %.1f), model state %.0f MB/rank (FULL_SHARD %.0f), "
                    "activation peak %.0f MB/rank\n", label.c_str(), r.tokens_per_s, full_shard.tokens_per_s,
                    model_state_mb(r), model_state_mb(full_shard), activations);
      std::fflush(stdout);
    }
  }

  // Offload, against FULL_SHARD: what the compute tier still holds, and what files save.
  void offload_rows(bool bf16, const Result& full_shard) {
    const double full_peak = megabytes(full_shard.peaks.total.peak);
    const double full_rss = megabytes(full_shard.peak_resident);
    for (const bool to_files : {false, true}) {
      Config offload = fsdp_config("FULL_SHARD", bf16);
      offload.dist.fsdp.offload_params = true;
      offload.dist.fsdp.cpu_ram_efficient_loading = true;
      if (to_files) offload.dist.fsdp.offload_dir = offload_dir;
      const Result o = run(offload);
      const std::string name =
          std::string(to_files ? "FULL_SHARD+offload_dir " : "FULL_SHARD+offload ") + (bf16 ? "bf16" : "f32");
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
      std::fflush(stdout);
    }
  }

  // PIPELINE, a stage per rank (and at 4 ranks 2 stages x 2 replicas, and 2 stages x 2
  // tensor-parallel ranks), one-row microbatches, 1F1B, GPipe and interleaved 1F1B (2 chunks per
  // rank), against FULL_SHARD on the same ranks: tokens/s (target 2 x 2 1F1B >= 0.85x; over a
  // simulated link, >= 1.5x), the highest rank's model state and
  // activations, the bytes all ranks send across (simulated) nodes per step (target 2 x 2
  // <= 0.25x, 4 ranks as 2 nodes), and the bubble: the ranks' mean share of the schedule (the step's
  // forwards and backwards, not the optimizer) spent not computing, against
  // (p - 1) / (m + p - 1), which assumes equal stages.
  void pipeline_rows(bool bf16, const Result& full_shard, const std::vector<std::string>& schedules,
                     const std::string& split_points) {
    const int p = world().size();
    const auto m = static_cast<int>(batch);
    const std::string dt = bf16 ? " bf16" : " f32";
    const double fsdp_cross = sum_over_ranks(full_shard.cross_node_mb);
    const double fsdp_state = highest_over_ranks(model_state_mb(full_shard));
    const double fsdp_activations = highest_over_ranks(megabytes(full_shard.peaks[memory::Category::activations].peak));
    // Each schedule with a stage per rank; at 4 ranks also 1F1B on 2 stages x 2 tensor-parallel
    // ranks and, last (pipeline.sh draws the last case's timeline), on 2 stages x 2 replicas.
    struct Layout {
      std::string schedule;
      int stages, tensor_parallel = 1;
    };
    std::vector<Layout> cases;
    for (const std::string& schedule : schedules) cases.push_back({schedule, p});
    if (p == 4 && std::ranges::find(schedules, "1F1B") != schedules.end()) {
      cases.push_back({"1F1B", 2, 2});
      cases.push_back({"1F1B", 2});
    }
    // The targets for pipeline x fsdp: >= 0.85x FULL_SHARD's tokens/s on one machine,
    // >= 1.5x over the slowest simulated link between the nodes.
    const bool link = std::getenv("ACC_SIM_CROSS_NODE_GBPS") != nullptr;
    for (const auto& [schedule, stages, tensor_parallel] : cases) {
      Config config;
      config.dist.strategy = "PIPELINE";
      config.section("pipeline_config").set("schedule", schedule);
      config.section("pipeline_config").set("stages", std::to_string(stages));
      config.section("pipeline_config").set("tensor_parallel", std::to_string(tensor_parallel));
      config.section("pipeline_config").set("split_points", split_points);
      const pipeline::Schedule kind = pipeline::parse_schedule(schedule);
      const bool interleaved = kind == pipeline::Schedule::interleaved_1f1b;
      if (interleaved) config.section("pipeline_config").set("stages_per_rank", "2");
      const int replicas = p / (stages * tensor_parallel);
      const int micro = m / replicas;  // each replica's rows, one per microbatch
      config.section("pipeline_config").set("microbatches", std::to_string(micro));
      config.compute.bf16 = bf16;
      const Result r = run(config);
      const std::string label = "PIPELINE " + schedule + " " + std::to_string(stages) + "x" +
                                std::to_string(replicas) +
                                (tensor_parallel > 1 ? "x" + std::to_string(tensor_parallel) + "tp" : "") +
                                " m=" + std::to_string(micro) + dt +
                                (split_points == "auto" ? "" : " split " + split_points);
      const bool target = p == 4 && schedule == "1F1B" && stages == 2 && tensor_parallel == 1;
      const double cross = sum_over_ranks(r.cross_node_mb), node = sum_over_ranks(r.node_mb);
      // Each rank's idle share of the step's schedule, the longest rank's: a rank that is done
      // with its part early waits out the rest of the step as well.
      const double span = highest_over_ranks(r.pipeline_schedule_s);
      const auto idle = every_rank(1.0 - r.pipeline_compute_s / span);
      const double bubble = std::accumulate(idle.begin(), idle.end(), 0.0) / p;  // the mean
      rows.push_back({label + " tokens/s", "tok/s", r.tokens_per_s, full_shard.tokens_per_s, "FULL_SHARD" + dt,
                      target ? (link ? 1.5 : 0.85) : 0.0});
      rows.push_back({label + " model state/rank (highest)", "MB", highest_over_ranks(model_state_mb(r)), fsdp_state,
                      "FULL_SHARD" + dt, 0});
      rows.push_back({label + " peak activations/rank (highest)", "MB",
                      highest_over_ranks(megabytes(r.peaks[memory::Category::activations].peak)), fsdp_activations,
                      "FULL_SHARD" + dt, 0});
      rows.push_back({label + " sent/step cross-node, all ranks", "MB", cross, fsdp_cross, "FULL_SHARD" + dt,
                      target && fsdp_cross > 0 ? 0.25 : 0.0});
      rows.push_back({label + " sent/step node-local, all ranks", "MB", node, 0, "", 0});
      // The bubble: (p - 1) / (v m + p - 1) with v chunks per rank; zero bubble's, with its
      // backward split into two parts as long as a forward, (p - 1) / (3 m + p - 1).
      const bool zero_bubble = kind == pipeline::Schedule::zero_bubble;
      const int chunks = interleaved ? 2 : zero_bubble ? 3 : 1;
      const double formula = static_cast<double>(stages - 1) / (chunks * micro + stages - 1);
      const std::string named = zero_bubble ? "(p-1)/(3m+p-1)" : interleaved ? "(p-1)/(2m+p-1)" : "(p-1)/(m+p-1)";
      rows.push_back({label + " bubble (mean idle share)", "%", 100 * bubble, 100 * formula, named, 0});
      // Per rank, the least and the most idle. Under 1F1B with a stage per rank each should be
      // at most 1.10x the formula, which holds for stages of equal times (pipeline.sh also runs
      // such stages) and a core per rank: with 4 ranks on 2 cores a waiting rank lends its core
      // and idles less than any schedule allows, so the row then says little either way.
      const double within = kind == pipeline::Schedule::one_f_one_b && stages == p ? 1.10 : 0.0;
      rows.push_back(
          {label + " bubble (least idle rank)", "%", 100 * std::ranges::min(idle), 100 * formula, named, within});
      rows.push_back(
          {label + " bubble (most idle rank)", "%", 100 * std::ranges::max(idle), 100 * formula, named, within});
      // The formula holds for stages of equal times. What the schedule makes of the stages'
      // measured times (each rank's forwards, backwards and weight parts, per microbatch, run
      // through pipeline::simulate) shows how much of a rank's gap to it is their difference.
      // A stage per rank only: an interleaved rank's chunks are not timed apart.
      if (!interleaved && stages == p) {
        const auto forward = every_rank(r.pipeline_times.forward / micro);
        const auto backward = every_rank(r.pipeline_times.backward / micro);
        const auto weight = every_rank(r.pipeline_times.weight / micro);
        std::vector<pipeline::StageTimes> times;
        for (size_t k = 0; k < forward.size(); ++k) times.push_back({forward[k], backward[k], weight[k]});
        const pipeline::Simulation predicted = pipeline::simulate(kind, p, micro, 1, times);
        for (size_t k = 0; k < idle.size(); ++k)
          rows.push_back({label + " bubble, rank " + std::to_string(k), "%", 100 * idle[k],
                          100 * predicted.rank_idle_share[k], "simulated at the stages' times", 0});
      }
      if (world().rank() == 0)
        std::printf("%s: %.1f tokens/s (FULL_SHARD %.1f), cross-node %.1f MB/step (FULL_SHARD %.1f), bubble %.1f%% "
                    "(formula %.1f%%)\n",
                    label.c_str(), r.tokens_per_s, full_shard.tokens_per_s, cross, fsdp_cross, 100 * bubble,
                    100 * formula);
      std::fflush(stdout);
    }
  }
};

// --cases: which groups of rows to run (an A/B of one setting need not wait for the others).
std::set<std::string> parse_cases(const std::string& list) {
  const std::set<std::string> known{"strategies", "prefetch",      "buckets", "levers",
                                    "checkpointing", "offload", "spmd",    "pipeline"};
  std::set<std::string> cases;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    ACC_CHECK(known.count(item), "--cases: unknown case '", item,
              "'; expected a comma-separated list of strategies, prefetch, buckets, levers, checkpointing, offload, spmd, "
              "pipeline");
    cases.insert(item);
  }
  return cases;
}

int run(int argc, char** argv) {
  train::Args args(argc, argv);
  const std::string model = args.get("model", "small");
  const int64_t batch = args.get_int("batch", 8), seq = args.get_int("seq", 512);
  const int64_t steps = args.get_int("steps", 2);
  const double base_f32 = args.get_double("baseline-f32", 0), base_bf16 = args.get_double("baseline-bf16", 0);
  const std::string out = args.get("out", world().size() == 1 ? "bench/results/strategies_single.json"
                                                              : "bench/results/strategies.json");
  const std::string offload_dir = args.get("offload-dir", "bench/results/offload");
  const double budget_mb = args.get_double("rss-budget", 0);
  const auto cases = parse_cases(args.get("cases", "strategies,prefetch,buckets,checkpointing,offload,spmd"));
  const std::string precision = args.get("precision", "both");
  const int rounds = static_cast<int>(args.get_int("rounds", 1));
  ACC_CHECK(rounds >= 1, "--rounds: ", rounds, " is not a positive number of rounds");
  std::set<std::string> levers;
  for (std::stringstream list(args.get("levers", "")); list.good();) {
    std::string item;
    std::getline(list, item, ',');
    if (!item.empty()) levers.insert(item);
  }
  std::vector<std::string> schedules;
  for (std::stringstream list(args.get("schedules", "1F1B,GPipe,interleaved_1F1B,zero_bubble")); list.good();) {
    std::string item;
    std::getline(list, item, ',');
    if (!item.empty()) schedules.push_back(item);
  }
  const std::string split_points = args.get("split-points", "auto");
  ACC_CHECK(precision == "both" || precision == "f32" || precision == "bf16", "--precision: '", precision,
            "' is not one of both, f32, bf16");
  args.finish();
  std::filesystem::create_directories(offload_dir);
  models::GPT2Config gpt = models::GPT2Config::from_name_or_file(model);
  gpt.n_positions = std::max(gpt.n_positions, seq);
  const std::string title = "GPT-2 " + model + " through acc::accelerate, global batch " + std::to_string(batch) +
                            " x " + std::to_string(seq) + ", " + std::to_string(world().size()) + " ranks x " +
                            std::to_string(runtime::num_threads()) + " threads";
  const std::map<std::string, std::string> context{{"cpu", bench::cpu_model()},
                                                   {"ranks", std::to_string(world().size())}};
  if (budget_mb > 0) {
    const auto rows = budget_rows(gpt, batch, seq, steps, budget_mb, offload_dir);
    if (world().rank() == 0) bench::report(title, rows, out, context);
    return 0;
  }

  Bench b{gpt, batch, seq, steps, offload_dir, {}};
  const bool single = world().size() == 1;
  const bool needs_full_shard =
      cases.count("checkpointing") || cases.count("offload") || cases.count("spmd") || cases.count("pipeline");
  // One process runs only the baseline, NO_SHARD; ranks run the strategies asked for, and
  // FULL_SHARD when the rows measured against it are.
  std::vector<std::string> strategies{"NO_SHARD"};
  if (!single && cases.count("strategies"))
    strategies = {"NO_SHARD", "FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"};
  else if (!single)
    strategies = needs_full_shard ? std::vector<std::string>{"FULL_SHARD"} : std::vector<std::string>{};
  for (bool bf16 : {false, true}) {
    if (precision != "both" && (precision == "bf16") != bf16) continue;
    const double baseline = bf16 ? base_bf16 : base_f32;
    const Result full_shard = b.strategy_rows(strategies, bf16, baseline);
    if (single) continue;
    if (cases.count("prefetch")) b.prefetch_rows(bf16, baseline);
    if (cases.count("buckets")) b.bucket_rows(bf16, baseline);
    if (cases.count("levers")) b.lever_rows(bf16, levers, rounds);
    if (cases.count("checkpointing")) b.checkpointing_rows(bf16, full_shard);
    if (cases.count("offload")) b.offload_rows(bf16, full_shard);
    if (cases.count("spmd")) b.spmd_rows(bf16, full_shard);
    if (cases.count("pipeline")) b.pipeline_rows(bf16, full_shard, schedules, split_points);
  }
  if (world().rank() == 0) bench::report(title, b.rows, out, context);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  acc::Session session(argc, argv);
  return acc::train::run_program("bench_strategies", [&] { return run(argc, argv); });
}
