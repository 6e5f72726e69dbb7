#include "acc/train/lm_program.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <unordered_map>

#include "acc/accelerate/accelerate.h"
#include "acc/autograd/grad_mode.h"
#include "acc/data/data_dir.h"
#include "acc/checkpoint/checkpoint.h"
#include "acc/data/dataloader.h"
#include "acc/memory/allocator.h"
#include "acc/train/metrics_log.h"
#include "acc/data/gpt2_tokenizer.h"
#include "acc/data/token_file.h"
#include "acc/models/checkpoint.h"
#include "acc/optim/optim.h"
#include "acc/runtime/init.h"
#include "acc/runtime/preemption.h"
#include "acc/runtime/threads.h"
#include "acc/train/cli.h"
#include "acc/train/generate.h"
#include "acc/train/progress.h"
#include "acc/train/throughput.h"
#include "acc/train/tier_io_meter.h"

namespace acc::train {

namespace {

constexpr const char* kUsage = R"(Trains on every rank of the job (accelerate launch) as the accelerate config says; --batch
is the global batch, split over the data-parallel ranks; only rank 0 prints.
options:
  --config_file FILE   accelerate config (distributed_type, fsdp_config, mixed_precision)
                       [ACC_CONFIG_FILE, else the default config `accelerate config`
                       wrote, else one process's NO_SHARD]; with
                       TRANSFORMER_BASED_WRAP the model's own block class is wrapped
  --config NAME|FILE   model preset (tiny, small, ...) or YAML of config.json keys [tiny]
  --data DIR           folder with train.bin and val.bin [data/brown]
  --steps N            optimizer steps [300]
  --batch N            sequences per step [16]
  --seq N              tokens per sequence [128]
  --lr X               peak learning rate [3e-3]; cosine decay to lr/10
  --warmup N           linear warmup steps [steps/10]
  --weight-decay X     AdamW weight decay on matrices [0.1]
  --clip X             gradient-norm clipping [1.0]
  --bf16               bf16 compute (mixed_precision: bf16): parameters gathered in bf16,
                       f32 master weights
  --val-every N        validation loss every N steps (0: only after the last) [100]
  --val-batches N      batches per validation; 0 = all of val.bin [0]
  --init-from FILE     start from a .safetensors file (Hugging Face names and layout)
  --save FILE          write the trained weights as .safetensors at the end
  --save_every N       a checkpoint every N steps into --checkpoint_dir [0: none]
  --save_total_limit K keep only the newest K checkpoints [0: all]
  --save_async         write checkpoints on a background thread while training goes on;
                       the step waits only for a copy of the state in host memory
  --run_dir DIR        where metrics.csv goes (accelerate plot DIR draws it) [runs/PROGRAM]
  --checkpoint_dir DIR where checkpoints go: DIR/step_000100, DIR/latest [checkpoints]
  --resume [auto|DIR]  continue from DIR, or from the latest checkpoint (--resume: it must
                       exist; --resume auto: when there is one; without DIR/latest, the newest
                       complete step_* folder) - same model, any world size
                       and strategy; a job restarted by accelerate launch --max_restarts
                       resumes as with --resume auto
  --sample-tokens N    tokens of generated text at the end [64]
  --seed N             init and data-order seed [0]
  --threads N          worker threads [all cores])";

struct Options {
  std::string config_file, config, data_dir, init_from, save, checkpoint_dir, run_dir;
  std::optional<std::string> resume;  // "" = latest, "auto" = latest if any, else a directory
  int64_t steps, batch, seq, warmup, val_every, val_batches, sample_tokens, threads;
  int64_t save_every, save_total_limit;
  double lr, weight_decay, clip;
  bool bf16, save_async;
  uint64_t seed;
};

Options parse(int argc, char** argv, const std::string& program) {
  Args args(argc, argv);
  Options o;
  o.config_file = args.get("config_file", "");
  o.config = args.get("config", "tiny");
  const auto default_data = data::find_data("brown");
  o.data_dir = args.get("data", default_data ? default_data->string() : "data/brown");
  o.steps = args.get_int("steps", 300);
  o.batch = args.get_int("batch", 16);
  o.seq = args.get_int("seq", 128);
  o.lr = args.get_double("lr", 3e-3);
  o.warmup = args.get_int("warmup", o.steps / 10);
  o.weight_decay = args.get_double("weight-decay", 0.1);
  o.clip = args.get_double("clip", 1.0);
  o.bf16 = args.flag("bf16");
  o.val_every = args.get_int("val-every", 100);
  o.val_batches = args.get_int("val-batches", 0);
  o.init_from = args.get("init-from", "");
  o.save = args.get("save", "");
  o.save_every = args.get_int("save_every", 0);
  o.save_total_limit = args.get_int("save_total_limit", 0);
  o.save_async = args.flag("save_async");
  o.checkpoint_dir = args.get("checkpoint_dir", "checkpoints");
  o.run_dir = args.get("run_dir", "runs/" + program);
  o.resume = args.get_optional("resume");
  // A job `accelerate launch --max_restarts` started again continues from its checkpoints.
  if (const char* restart = std::getenv("ACC_RESTART_COUNT"); !o.resume && restart && std::atoi(restart) > 0)
    o.resume = "auto";
  o.sample_tokens = args.get_int("sample-tokens", 64);
  o.seed = static_cast<uint64_t>(args.get_int("seed", 0));
  o.threads = args.get_int("threads", 0);
  args.finish();
  ACC_CHECK(o.steps > 0 && o.batch > 0 && o.seq > 0, "--steps, --batch and --seq must be positive");
  ACC_CHECK(o.val_every >= 0, "--val-every must be >= 0 (0: only after the last step)");
  ACC_CHECK(o.save_every >= 0 && o.save_total_limit >= 0,
            "--save_every and --save_total_limit must be >= 0 (0: never / keep all)");
  ACC_CHECK(o.val_batches >= 0, "--val-batches must be >= 0 (0 = all of val.bin)");
  ACC_CHECK(o.lr > 0 && o.clip > 0 && o.warmup >= 0, "--lr and --clip must be positive, --warmup >= 0");
  return o;
}

std::filesystem::path data_file(const Options& o, const char* name) {
  const auto path = std::filesystem::path(o.data_dir) / name;
  ACC_CHECK(std::filesystem::is_regular_file(path), "missing data file ", path.string(),
            " (run scripts/fetch-data, or pass --data DIR holding train.bin and val.bin)");
  return path;
}

// The mean over the ranks of a value each rank computed on its slice.
double rank_mean(double value) {
  Tensor t = Tensor::from_vector({static_cast<float>(value / world().size())}, {1});
  world().all_reduce(t);
  return t.item();
}

// Every rank scores its slice of each validation batch; the mean is over all of them.
double validation_loss(models::Model& model, const data::DataLoader& val, int64_t batches) {
  autograd::NoGradGuard no_grad;
  model.eval();
  double total = 0;
  int64_t n = 0;
  for (auto& batch : val) {
    total += model.forward(batch).loss.item();
    if (++n == batches) break;  // never, for batches = 0: the whole set
  }
  model.train();
  return n ? rank_mean(total / static_cast<double>(n)) : NAN;
}

// The accelerate config: --config_file, else Config::load() (ACC_CONFIG_FILE, the default
// config, the defaults), as the programs run it.
Config load_config(const Options& o) {
  Config config = with_program_defaults(o.config_file.empty() ? Config::load() : Config::from_file(o.config_file));
  if (o.bf16) config.compute.bf16 = true;
  return config;
}


std::unordered_map<int32_t, int64_t> token_counts(std::span<const int32_t> tokens) {
  std::unordered_map<int32_t, int64_t> counts;
  for (int32_t t : tokens) ++counts[t];
  return counts;
}

std::string format(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, a, b, c, d);
  return buf;
}

void print_sample(models::CausalLM& model, const Options& o) {
  if (o.sample_tokens <= 0) return;
  const auto vocab_dir = data::find_gpt2_vocab_dir();
  if (!vocab_dir) {
    std::printf("(no GPT-2 vocabulary found for a text sample; run scripts/fetch-data)\n");
    return;
  }
  data::Gpt2Tokenizer tokenizer(*vocab_dir);
  const auto ids = generate(model, tokenizer.encode("The"),
                            {.max_new_tokens = o.sample_tokens, .temperature = 0.8, .top_k = 40,
                             .seed = o.seed});
  std::printf("sample: %s\n", tokenizer.decode(ids).c_str());
}

// The checkpoint --resume names, if any (a collective: rank 0's lookup decides).
std::optional<std::filesystem::path> resume_dir(const Options& o) {
  if (!o.resume) return std::nullopt;
  if (!o.resume->empty() && *o.resume != "auto") return std::filesystem::path(*o.resume);
  const auto latest = checkpoint::resumable_checkpoint(o.checkpoint_dir);
  ACC_CHECK(latest || *o.resume == "auto", "--resume: no checkpoint in ", o.checkpoint_dir,
            " (neither ", o.checkpoint_dir, "/latest nor a complete step_* folder); --resume auto starts "
            "afresh then");
  return latest;
}

int run(const Options& o, const std::string& program, const CausalLMFactory& make_model) {
  const auto started = std::chrono::steady_clock::now();
  if (o.threads > 0) runtime::set_num_threads(static_cast<int>(o.threads));
  const auto train_path = data_file(o, "train.bin"), val_path = data_file(o, "val.bin");
  if (!o.init_from.empty())
    ACC_CHECK(std::filesystem::is_regular_file(o.init_from), "--init-from: no file ", o.init_from);

  const Config config = load_config(o);
  std::shared_ptr<models::CausalLM> model;
  {  // fsdp_cpu_ram_efficient_loading: each rank makes only its shards (not when loading a file)
    nn::DeferredInit deferred(strategy_answer(config, &OptionSection::deferred_init, false) && o.init_from.empty());
    model = make_model(o.config, o.seed);
  }
  ACC_CHECK(o.seq <= model->max_seq_len(), "--seq ", o.seq, " exceeds the model's ",
            model->max_seq_len(), " positions");
  if (!o.init_from.empty()) models::load_model(*model, o.init_from);
  const bool main = world().rank() == 0;
  auto say = [main](const std::string& line) {
    if (main) std::printf("%s\n", line.c_str());
  };

  data::TokenFile train_set(train_path, o.seq);
  data::TokenFile val_set(val_path, o.seq, {.random_windows = false});
  ACC_CHECK(train_set.size() >= o.batch && val_set.size() >= 1, program, ": data in ", o.data_dir,
            " is too small for --batch ", o.batch, " x --seq ", o.seq);
  const auto tokens = data::read_token_file(train_path);
  const double unigram = unigram_entropy(tokens);
  const double unigram_val =
      unigram_cross_entropy(tokens, data::read_token_file(val_path), model->vocab_size());
  const DType compute = config.compute.bf16 ? DType::bf16 : DType::f32;
  const std::string layout = strategy_answer(config, &OptionSection::summary, std::string());
  say(program + ": " + o.config + ", " +
      std::to_string(model->num_parameters()) + " parameters, " + std::string(dtype_name(compute)) +
      " compute, " + config.strategy_name() + " on " + std::to_string(world().size()) +
      " ranks" + (layout.empty() ? "" : ", " + layout) + "; data " + std::to_string(train_set.num_tokens()) + " train / " +
      std::to_string(val_set.num_tokens()) + " val tokens");
  say(format("the losses to beat: unigram entropy of train.bin %.4f nats; that unigram model on "
             "val.bin (add-one smoothing) %.4f nats", unigram, unigram_val));

  // Every rank measures its own share of the machine at once: the job's ceiling is the sum.
  world().barrier();
  const double peak = measure_gemm_peak_gflops(compute) * world().size();
  say(std::string(dtype_name(compute)) + format(" GEMM peak (acc matmul, 1024^3, all ranks): %.1f GFLOP/s", peak));
  std::fflush(stdout);

  data::DataLoader all_train(train_set, {.batch_size = o.batch, .shuffle = true, .drop_last = true, .seed = o.seed});
  // Every rank must see the same number of validation batches: no ragged last batch.
  data::DataLoader all_val(val_set, {.batch_size = o.batch, .drop_last = world().size() > 1});
  // Counted on the whole model: a tensor-parallel strategy leaves each rank its slices.
  const double flops_per_token = model->train_flops_per_token(o.seq);
  auto [sharded, loader] = accelerate(model, all_train, config);
  const auto val_loader = all_val.for_rank(loader.options().rank, loader.options().world);
  optim::AdamW opt(sharded->param_groups(o.weight_decay), {.lr = o.lr, .beta1 = 0.9, .beta2 = 0.95});
  optim::LRScheduler schedule(opt, optim::warmup_cosine_lr(o.lr, o.lr / 10, o.warmup, o.steps), o.lr);

  checkpoint::TrainingState state{sharded.get(), &opt, &schedule, &config, {}};
  if (const auto from = resume_dir(o)) {
    checkpoint::load_state(*from, state);
    say("resumed from " + from->string() + " at step " + std::to_string(state.position.step));
  }
  checkpoint::Position& at = state.position;

  ThroughputMeter meter(flops_per_token, peak);
  TierIoMeter tier_io;  // with fsdp_offload_dir: the disk's rates on the bar, its totals at the end
  std::optional<ProgressBar> bar;  // rank 0's
  std::optional<MetricsLog> metrics;
  if (main) {
    bar.emplace(o.steps, "train");
    metrics.emplace(o.run_dir, at.step);
  }
  if (bar && at.step > 0) bar->resume_at(at.step);
  loader.set_epoch(at.epoch);
  auto it = loader.begin_at(at.batch);
  double last_loss = NAN, val = NAN;
  const int64_t first_step = at.step;
  const bool finished = first_step >= o.steps;  // a resume of a finished run
  if (finished) {  // nothing to train; the model is still evaluated
    say("the checkpoint is at step " + std::to_string(first_step) + " of --steps " + std::to_string(o.steps) +
        ": nothing to train (raise --steps to train on)");
    val = validation_loss(*sharded, val_loader, o.val_batches);
  }
  for (int64_t step = first_step; step < o.steps; ++step) {
    if (it == loader.end()) {
      loader.set_epoch(++at.epoch);
      at.batch = 0;
      it = loader.begin();
    }
    meter.begin_step();
    opt.zero_grad();
    Tensor loss = sharded->forward(*it).loss;
    loss.backward();
    const double norm = sharded->clip_grad_norm(o.clip);
    const double lr = opt.lr(0);
    opt.step();
    schedule.step();
    ++it;
    ++at.batch;
    at.step = step + 1;
    last_loss = rank_mean(loss.item());
    if (step == first_step) meter.reset();  // the first step pays for primitive creation and page faults
    else meter.step(o.batch * o.seq);
    auto save = [&] {
      const int keep = static_cast<int>(o.save_total_limit);
      const auto dir = o.save_async ? checkpoint::save_async(o.checkpoint_dir, state, keep)
                                    : checkpoint::save_checkpoint(o.checkpoint_dir, state, keep);
      if (bar) bar->write(std::string(o.save_async ? "saving " : "saved ").append(dir.string()));
      return dir;
    };
    std::optional<std::filesystem::path> saved;  // this step's checkpoint, if any
    if (o.save_every > 0 && at.step % o.save_every == 0) saved = save();
    if (bar) {
      bar->set_postfix(format("loss=%.4f lr=%.2e norm=%.2f %.0f tok/s", last_loss, lr, norm,
                              meter.tokens_per_second()) +
                       format(" mfu=%.1f%%", 100 * meter.mfu()) + tier_io.rates());
      bar->update();
    }
    const bool measured = meter.steps() > 0;  // it leaves a run's first step out
    MetricsRow row{.step = at.step,
                   .loss = last_loss,
                   .lr = lr,
                   .grad_norm = norm,
                   .tokens_per_s = measured ? std::optional(meter.tokens_per_second()) : std::nullopt,
                   .mfu = measured ? std::optional(meter.mfu()) : std::nullopt,
                   .peak_mb = static_cast<double>(memory::report().total.peak) / (1 << 20)};
    if ((o.val_every > 0 && (step + 1) % o.val_every == 0) || step + 1 == o.steps) {
      val = validation_loss(*sharded, val_loader, o.val_batches);
      row.val_loss = val;
      if (bar)
        bar->write(format("step %.0f: train loss %.4f (unigram %.4f), ", double(step + 1), last_loss,
                          unigram) +
                   format("val loss %.4f (unigram %.4f)", val, unigram_val));
    }
    if (metrics) metrics->append(row);
    if (preemption_agreed(world())) {  // every rank stops after this same step
      const auto dir = saved ? *saved : save();
      checkpoint::finish_saves();
      if (bar) bar->close();
      say("preempted at step " + std::to_string(at.step) + ", checkpoint at " + dir.string() +
          "; resume with --resume auto");
      return kPreemptedExitCode;
    }
  }
  if (bar) bar->close();
  if (const auto dir = checkpoint::finish_saves()) say("saved " + dir->string());
  // Each figure says what it covers: the training steps alone, then the whole run.
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (finished)
    say("final: " + describe_val_loss(val, unigram_val) + "; no training steps; " + format("%.1f s in all", wall));
  else
    say(format("final: train loss %.4f (unigram %.4f), ", last_loss, unigram) + describe_val_loss(val, unigram_val) +
        "; " +
        format("%.0f tokens/s, MFU %.1f%% of %.1f GFLOP/s over ", meter.tokens_per_second(), 100 * meter.mfu(), peak) +
        format("%.0f training steps (not the first, evaluation or saves); %.1f s in all", double(meter.steps()), wall));
  if (tier_io.active()) say("rank 0: " + tier_io.summary());
  if (!o.save.empty()) {
    auto trained = make_model(o.config, o.seed);  // a whole f32 copy: the file holds the masters
    sharded->copy_full_parameters_to(*trained);   // a collective: every rank takes part
    if (main) {
      models::save_model(*trained, o.save);
      std::printf("saved %s\n", o.save.c_str());
    }
  }
  if (o.sample_tokens > 0) {
    auto whole = sharded->summon_full_params();  // a collective: every unit gathered
    if (main) print_sample(*model, o);           // the user's model, its parameters now whole
  }
  return 0;
}

}  // namespace

std::string describe_val_loss(double val, double unigram) {
  return format("val loss %.4f (unigram %.4f, %.2f nats ", val, unigram, std::abs(unigram - val)) +
         (val <= unigram ? "below)" : "above)");
}

Config with_program_defaults(Config config) {
  if (const auto section = config.strategy_section(); section && section->program_defaults)
    section->program_defaults(config);
  return config;
}

double unigram_entropy(std::span<const int32_t> tokens) {
  const auto counts = token_counts(tokens);
  const double n = static_cast<double>(tokens.size());
  double h = 0;
  for (const auto& [token, count] : counts) {
    const double p = static_cast<double>(count) / n;
    h -= p * std::log(p);
  }
  return h;
}

double unigram_cross_entropy(std::span<const int32_t> fit, std::span<const int32_t> score,
                             int64_t vocab_size) {
  const auto counts = token_counts(fit);
  const double total = static_cast<double>(fit.size()) + static_cast<double>(vocab_size);
  double loss = 0;
  for (int32_t t : score) {
    const auto it = counts.find(t);
    loss -= std::log((static_cast<double>(it == counts.end() ? 0 : it->second) + 1.0) / total);
  }
  return score.empty() ? 0.0 : loss / static_cast<double>(score.size());
}

int lm_main(int argc, char** argv, const std::string& program, const CausalLMFactory& make_model) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help") {
      std::printf("usage: %s [options]\n%s\n", program.c_str(), kUsage);
      return 0;
    }
  std::optional<Session> session;  // a test may have started acc already
  if (!initialized()) session.emplace(argc, argv);
  return run_program(program, [&] { return run(parse(argc, argv, program), program, make_model); });
}

}  // namespace acc::train
