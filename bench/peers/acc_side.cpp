// bench_peers: acc's half of the peer benchmark (bench/peers/run.sh). GPT-2 trained on fixed,
// in-order windows of a token file with AdamW and clipping, the same loop torch_gpt2.py runs on
// the same batches; writes the per-step losses, tokens/s and per-rank peak RSS as JSON.
//   bench_peers --model tiny|small --batch B --seq T --steps N [--bf16] --data FILE
//               [--init FILE] --out FILE [--config_file F]
// --init writes the initial weights (Hugging Face layout) for the torch side to start from.
// Under mpirun it trains through acc::accelerate with the config (ACC_CONFIG_FILE or
// --config_file); one process runs NO_SHARD on its own.
#include <chrono>
#include <fstream>
#include <string>

#include "acc/acc.h"
#include "acc/memory/resident.h"
#include "acc/models/checkpoint.h"
#include "acc/runtime/threads.h"
#include "acc/train/cli.h"
#include "support/measure.h"

namespace {

using namespace acc;

int run(int argc, char** argv) {
  train::Args args(argc, argv);
  const std::string model_name = args.get("model", "tiny"), data = args.get("data", "data/brown/train.bin");
  const int64_t batch = args.get_int("batch", 4), seq = args.get_int("seq", 256), steps = args.get_int("steps", 5);
  const bool bf16 = args.flag("bf16");
  const std::string init = args.get("init", ""), out = args.get("out", "peers_acc.json");
  const std::string config_file = args.get("config_file", "");
  args.finish();

  models::GPT2Config c = models::GPT2Config::from_name_or_file(model_name);
  c.n_positions = std::max(c.n_positions, seq);
  auto model = std::make_shared<models::GPT2>(c, 0);
  if (!init.empty() && world().rank() == 0) models::save_model(*model, init);
  world().barrier();

  Config config = config_file.empty() ? Config::load() : Config::from_file(config_file);
  config.compute.bf16 = config.compute.bf16 || bf16;
  data::DataLoader loader(data::TokenFile(data, seq, {.random_windows = false}),
                          {.batch_size = batch, .shuffle = false, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(model, loader, config);
  model.reset();
  optim::AdamW opt(sharded->param_groups(0.1), {.lr = 3e-4});

  std::vector<double> losses, seconds;
  for (auto& b : rank_loader) {
    if (static_cast<int64_t>(losses.size()) == steps) break;
    world().barrier();
    const auto start = std::chrono::steady_clock::now();
    opt.zero_grad();
    Tensor loss = sharded->forward(b).loss;
    loss.backward();
    sharded->clip_grad_norm(1.0);
    opt.step();
    Tensor mean = Tensor::from_vector({loss.item()}, {1});
    world().all_reduce(mean, dist::ReduceOp::avg);  // the global batch's loss
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    losses.push_back(mean.item());
  }
  ACC_CHECK(static_cast<int64_t>(losses.size()) == steps, "bench_peers: ", data, " holds only ", losses.size(),
            " batches of ", batch, " x ", seq);
  // Steady state: the first step creates oneDNN primitives and touches fresh pages.
  double timed = 0;
  for (size_t i = 1; i < seconds.size(); ++i) timed += seconds[i];
  const double tokens_per_s = static_cast<double>((steps - 1) * batch * seq) / timed;
  std::vector<float> rss(static_cast<size_t>(world().size()), 0.f);
  rss[static_cast<size_t>(world().rank())] = static_cast<float>(static_cast<double>(memory::peak_resident_bytes()) / (1 << 20));
  Tensor all_rss = Tensor::from_vector(rss, {world().size()});
  world().all_reduce(all_rss);
  if (world().rank() == 0) {
    std::ofstream json(out);
    json << "{\"framework\": \"acc\", \"model\": \"" << model_name << "\", \"batch\": " << batch
         << ", \"seq\": " << seq << ", \"ranks\": " << world().size() << ", \"threads\": "
         << runtime::num_threads() << ", \"dtype\": \"" << (config.compute.bf16 ? "bf16" : "f32")
         << "\", \"strategy\": \"" << config.strategy_name() << "\", \"tokens_per_s\": " << tokens_per_s
         << ", \"peak_rss_mb\": [";
    for (size_t r = 0; r < rss.size(); ++r) json << (r ? ", " : "") << all_rss.to_vector()[r];
    json << "], \"losses\": [";
    char number[32];
    for (size_t i = 0; i < losses.size(); ++i) {
      std::snprintf(number, sizeof number, "%.9g", losses[i]);
      json << (i ? ", " : "") << number;
    }
    json << "], \"cpu\": \"" << bench::cpu_model() << "\"}\n";
    std::printf("acc %s %s x%d: %.1f tokens/s, last loss %.6f\n", config.strategy_name().c_str(),
                config.compute.bf16 ? "bf16" : "f32", world().size(), tokens_per_s, losses.back());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  acc::Session session(argc, argv);
  return acc::train::run_program("bench_peers", [&] { return run(argc, argv); });
}
