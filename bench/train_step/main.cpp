// bench_train_step: one full training step (forward, backward, clip, AdamW) of GPT-2 small at
// B=8, T=512 and of tiny, in f32 and bf16 compute, after warm-up. Prints tokens/s and model
// FLOPs utilisation against the GEMM peak measured in the same run, the step's profile (which
// ops take the time) and peak memory per category; writes bench/results/train_step.json.
//
// Model FLOPs per token = 6 N + 12 L T C (N = parameters used in products, i.e. all but GPT-2's
// position table; 12 L T C is attention's QK^T and AV, PaLM's convention): see
// GPT2::train_flops_per_token.
//   ./build/bin/bench_train_step [--out FILE] [--small-steps N] [--tiny-steps N] [--skip-small]
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "acc/accelerate/accelerate.h"
#include "acc/kernels/matmul.h"
#include "acc/memory/allocator.h"
#include "acc/models/gpt2.h"
#include "acc/optim/optim.h"
#include "acc/runtime/init.h"
#include "acc/runtime/threads.h"
#include "acc/train/cli.h"
#include "acc/util/profiler.h"
#include "kernels/raw_onednn.h"
#include "support/measure.h"

namespace {

using namespace acc;
using bench::Row;

struct Case {
  std::string name;
  models::GPT2Config config;
  int64_t batch, seq, timed_steps;
  bool bf16;
};

data::Batch random_batch(int64_t B, int64_t T, int64_t vocab) {
  Tensor ids = Tensor::rand_uniform({B, T + 1}, 3, "bench.tokens", 0.f, static_cast<float>(vocab));
  std::vector<int32_t> in, out;
  const auto v = ids.to_vector();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      in.push_back(static_cast<int32_t>(v[b * (T + 1) + t]));
      out.push_back(static_cast<int32_t>(v[b * (T + 1) + t + 1]));
    }
  data::Batch batch;
  batch.set("input_ids", Tensor::from_vector_i32(in, {B, T}));
  batch.set("labels", Tensor::from_vector_i32(out, {B, T}));
  return batch;
}

// The best of raw oneDNN 2048^3 products (about 17 GFLOP each): no acc code on the path; B
// stored [N, K], the layout oneDNN runs fastest (on AMX much faster than [K, N]).
double raw_gemm_peak(dnnl::memory::data_type type) {
  const int64_t n = 2048;
  const DType dt = type == dnnl::memory::data_type::f32 ? DType::f32 : DType::bf16;
  Tensor a = Tensor::rand_uniform({n, n}, 1, "peak.a", -1.f, 1.f, dt);
  Tensor b = Tensor::rand_uniform({n, n}, 1, "peak.b", -1.f, 1.f, dt);
  Tensor c = Tensor::empty({n, n});
  bench::RawOnednnMatmul raw(n, n, n, false, true, type);
  const double t = bench::seconds_per_call([&] { raw.run(a.raw_data(), b.raw_data(), c.data<float>()); }, 1.0);
  return 2.0 * n * n * n / t / 1e9;
}

struct StepParts {
  double forward = 0, backward = 0, optimizer = 0;
  double total() const { return forward + backward + optimizer; }
};

StepParts train_step(ShardedModel& model, optim::AdamW& opt, const data::Batch& batch) {
  using clock = std::chrono::steady_clock;
  StepParts s;
  auto t0 = clock::now();
  opt.zero_grad();
  Tensor loss = model.forward(batch).loss;
  auto t1 = clock::now();
  loss.backward();
  auto t2 = clock::now();
  {
    ACC_PROFILE("clip_grad_norm + AdamW");
    model.clip_grad_norm(1.0);
    opt.step();
  }
  auto t3 = clock::now();
  s.forward = std::chrono::duration<double>(t1 - t0).count();
  s.backward = std::chrono::duration<double>(t2 - t1).count();
  s.optimizer = std::chrono::duration<double>(t3 - t2).count();
  return s;
}

void run_case(const Case& c, double peak_f32, double peak_bf16, std::vector<Row>& rows) {
  std::printf("\n== %s: B=%lld T=%lld, %s compute, %lld timed steps\n", c.name.c_str(),
              static_cast<long long>(c.batch), static_cast<long long>(c.seq), c.bf16 ? "bf16" : "f32",
              static_cast<long long>(c.timed_steps));
  std::fflush(stdout);
  memory::reset_peaks();
  const auto before = memory::report();
  // One process through the engine: what acc::accelerate gives a plain run (NO_SHARD on one
  // rank), bf16 included, so this is the step users get.
  Config config;
  config.compute.bf16 = c.bf16;
  std::shared_ptr<ShardedModel> sharded =
      make_strategy(config)->wrap(std::make_shared<models::GPT2>(c.config, 0));
  ShardedModel& model = *sharded;
  optim::AdamW opt(model.param_groups(0.1), {.lr = 1e-4});
  const auto batch = random_batch(c.batch, c.seq, c.config.vocab_size);
  train_step(model, opt, batch);  // warm-up: primitives, optimizer state, page faults

  StepParts sum;
  for (int64_t i = 0; i < c.timed_steps; ++i) {
    const StepParts s = train_step(model, opt, batch);
    sum.forward += s.forward;
    sum.backward += s.backward;
    sum.optimizer += s.optimizer;
  }
  const double n = static_cast<double>(c.timed_steps);
  const double step = sum.total() / n;
  const double tokens = static_cast<double>(c.batch * c.seq);
  const double gflops = model.train_flops_per_token(c.seq) * tokens / step / 1e9;
  const double peak = c.bf16 ? peak_bf16 : peak_f32;
  const std::string tag = c.name + (c.bf16 ? " bf16" : " f32");
  rows.push_back({tag + " step", "ms", 1e3 * step, 0, "", 0});
  rows.push_back({tag + " forward", "ms", 1e3 * sum.forward / n, 0, "", 0});
  rows.push_back({tag + " backward", "ms", 1e3 * sum.backward / n, 0, "", 0});
  rows.push_back({tag + " clip+AdamW", "ms", 1e3 * sum.optimizer / n, 0, "", 0});
  rows.push_back({tag + " tokens/s", "tokens/s", tokens / step, 0, "", 0});
  rows.push_back({tag + " model FLOP/s (MFU)", "GFLOP/s", gflops, peak,
                  c.bf16 ? "bf16 GEMM peak" : "f32 GEMM peak", c.bf16 ? 0.35 : 0.5});

  // One more step with the profiler on: where the time goes, by op.
  profiler::reset();
  profiler::enable(true);
  const double profiled = train_step(model, opt, batch).total();
  profiler::enable(false);
  double attributed = 0;
  std::printf("profile of one step (%.1f ms):\n", 1e3 * profiled);
  for (const auto& e : profiler::snapshot()) {
    attributed += e.seconds;
    std::printf("  %-28s %9.2f ms %5.1f%%  %5lld calls\n", e.name.c_str(), 1e3 * e.seconds,
                100 * e.seconds / profiled, static_cast<long long>(e.calls));
    if (e.seconds > 0.01 * profiled)
      rows.push_back({tag + " profile " + e.name, "ms", 1e3 * e.seconds, 0, "", 0});
  }
  std::printf("  %-28s %9.2f ms %5.1f%%  (autograd engine, unmarked ops, allocation)\n",
              "(not attributed)", 1e3 * (profiled - attributed), 100 * (profiled - attributed) / profiled);

  const auto after = memory::report();
  std::printf("peak memory (MB):");
  for (size_t i = 0; i < memory::kNumCategories; ++i) {
    const auto cat = static_cast<memory::Category>(i);
    const double mb = static_cast<double>(after[cat].peak - before[cat].current) / 1e6;
    if (mb <= 0) continue;
    std::printf(" %s %.1f", std::string(memory::category_name(cat)).c_str(), mb);
    rows.push_back({tag + " peak " + std::string(memory::category_name(cat)), "MB", mb, 0, "", 0});
  }
  // What the blocks hold beyond the requests (whole huge pages): resident, in no category.
  const double rounding_mb = static_cast<double>(after.rounding.peak - before.rounding.current) / 1e6;
  std::printf(" | total %.1f | block rounding %.1f\n", static_cast<double>(after.total.peak - before.total.current) / 1e6,
              rounding_mb);
  rows.push_back({tag + " peak block rounding", "MB", rounding_mb, 0, "", 0});
  std::fflush(stdout);
}

int run(int argc, char** argv) {
  train::Args args(argc, argv);
  const std::string out = args.get("out", "bench/results/train_step.json");
  const int64_t small_steps = args.get_int("small-steps", 2);
  const int64_t tiny_steps = args.get_int("tiny-steps", 10);
  const bool skip_small = args.flag("skip-small");
  args.finish();
  runtime::set_num_threads(runtime::default_num_threads());

  const bool native_bf16 = kernels::has_native_bf16();
  const double peak_f32 = raw_gemm_peak(dnnl::memory::data_type::f32);
  // Without native bf16 (this CPU: AVX2 only) oneDNN 2.6 has no bf16 GEMM; acc converts bf16
  // operands to f32, so the f32 peak is the honest ceiling for bf16 compute too.
  const double peak_bf16 = native_bf16 ? raw_gemm_peak(dnnl::memory::data_type::bf16) : peak_f32;
  std::printf("GEMM peak (raw oneDNN 2048^3): f32 %.1f GFLOP/s, bf16 %.1f GFLOP/s%s\n", peak_f32,
              peak_bf16, native_bf16 ? "" : " (no native bf16: the f32 peak)");
  std::vector<Row> rows{{"f32 GEMM peak (raw oneDNN 2048^3)", "GFLOP/s", peak_f32, 0, "", 0},
                        {"bf16 GEMM peak", "GFLOP/s", peak_bf16, 0, "", 0}};

  std::vector<Case> cases;
  for (bool bf16 : {false, true}) {
    cases.push_back({"gpt2-tiny B8 T256", models::GPT2Config::tiny(), 8, 256, tiny_steps, bf16});
    if (!skip_small)
      cases.push_back({"gpt2-small B8 T512", models::GPT2Config::small(), 8, 512, small_steps, bf16});
  }
  for (const Case& c : cases) run_case(c, peak_f32, peak_bf16, rows);
  bench::report("training step (forward + backward + AdamW)", rows, out,
                {{"threads", std::to_string(runtime::num_threads())},
                 {"native_bf16", native_bf16 ? "yes" : "no"},
                 {"flops_formula", "6*N*tokens + 12*L*T*C*tokens (N without the position table)"}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  acc::Session session(argc, argv);
  return acc::train::run_program("bench_train_step", [&] { return run(argc, argv); });
}
