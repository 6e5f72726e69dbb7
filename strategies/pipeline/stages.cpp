#include "stages.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "acc/ops/ops.h"
#include "acc/util/error.h"
#include "acc/util/strings.h"

namespace acc::pipeline {
namespace {

// True when `parameter` is `module` itself's or one of its submodules'.
bool inside(const std::string& parameter, const std::string& module) {
  return parameter.size() > module.size() && parameter.starts_with(module) && parameter[module.size()] == '.';
}

std::string layer_range(const std::vector<std::string>& layers) {
  if (layers.empty()) return "none";
  return layers.size() == 1 ? layers.front() : layers.front() + " ... " + layers.back();
}

// The name of a plan's unit: its layer's, or of a plan by branches the layer's with the branch's
// last module (transformer.h.6.mlp; split_points takes it).
std::string unit_name(const models::Structure::Chain& chain, const StagePlan& plan, int64_t unit) {
  const auto layer = static_cast<size_t>(unit / plan.parts);
  const auto branch = static_cast<size_t>(unit % plan.parts);
  return plan.parts == 1 ? chain.layers[layer] : chain.layers[layer] + "." + chain.branches[branch].back();
}

// x + `modules` (names within `layer`) run in turn on x.
Tensor run_branch(nn::Module& layer, const std::vector<std::string>& modules, const Tensor& x) {
  Tensor y = x;
  for (const auto& name : modules) y = layer.submodule(name)(y);
  return ops::add(x, y);
}

// What `auto` balances, per layer: the parameters it uses in products per token plus
// `layer_attention`; and the head's weight, which the last stage uses so (0 when none is named).
struct ProductCosts {
  std::vector<int64_t> layers;
  int64_t head = 0;
};
ProductCosts product_costs(const models::Structure::Chain& chain,
                           const std::vector<std::pair<std::string, int64_t>>& parameters,
                           const std::string& head_weight, int64_t layer_attention) {
  ProductCosts out{.layers = std::vector<int64_t>(chain.layers.size(), layer_attention)};
  for (const auto& [name, numel] : parameters) {
    if (name == head_weight) out.head = numel;
    for (size_t i = 0; i < chain.layers.size(); ++i)
      if (inside(name, chain.layers[i])) out.layers[i] += numel;
  }
  return out;
}

// With more stages than ranks: the plan of `stages` contiguous stages over units [0, n) that
// scores least by (the busiest rank's sum of its stages' costs, the largest stage's cost), of
// those the one whose cuts come first (the first stages short, so that every rank starts soon).
// It searches the cuts in order, dropping every partial plan that can no longer beat the best
// found, from `units` (a plan balancing the largest stage) as the one to beat: a chain of
// hundreds of units over dozens of stages could take long, and past kBudget partial plans the
// best found stands, never worse than `units`. `cost(s, begin, end)` is stage s's.
template <typename Cost>
void balance_ranks(std::vector<std::pair<int64_t, int64_t>>& units, int ranks, int64_t n, const Cost& cost) {
  constexpr int64_t kBudget = int64_t{1} << 22;
  const auto stages = static_cast<int>(units.size());
  using Score = std::pair<int64_t, int64_t>;
  std::vector<int64_t> sum(static_cast<size_t>(ranks), 0);
  int64_t total = 0, largest_start = 0;
  for (int s = 0; s < stages; ++s) {
    const int64_t c = cost(s, units[s].first, units[s].second);
    sum[static_cast<size_t>(s % ranks)] += c;
    total += c;
    largest_start = std::max(largest_start, c);
  }
  // One above `units`' own score, so that an earlier plan scoring the same replaces it.
  Score best{std::ranges::max(sum), largest_start + 1};
  std::ranges::fill(sum, 0);
  std::vector<std::pair<int64_t, int64_t>> plan(units.size());
  int64_t budget = kBudget;
  // Stage s begins at `begin`; the stages before it cost at most `largest`.
  auto search = [&](auto& self, int s, int64_t begin, int64_t largest) -> void {
    if (--budget < 0) return;
    const int64_t last_end = s == stages - 1 ? n : n - (stages - 1 - s);
    for (int64_t end = s == stages - 1 ? n : begin + 1; end <= last_end; ++end) {
      const int64_t c = cost(s, begin, end);
      int64_t& mine = sum[static_cast<size_t>(s % ranks)];
      mine += c;
      // What any plan through here scores at least (the busiest rank has at least its share).
      const Score least{std::max(std::ranges::max(sum), (total - 1) / ranks + 1), std::max(largest, c)};
      if (least < best) {
        plan[static_cast<size_t>(s)] = {begin, end};
        if (s == stages - 1) {
          best = least;  // a whole plan scores what it has
          units = plan;
        } else {
          self(self, s + 1, end, least.second);
        }
      }
      mine -= c;
      if (!(least < best)) break;  // costs are >= 0: a longer stage s scores no less
    }
  };
  search(search, 0, 0, 0);
}

}  // namespace

StageGrid stage_grid(int stages, int tensor_parallel, int world, int rank) {
  ACC_CHECK(tensor_parallel >= 1 && world % tensor_parallel == 0, "pipeline_config.tensor_parallel: ",
            tensor_parallel, " tensor-parallel ranks per stage do not divide the ", world, " processes");
  const int groups = world / tensor_parallel;  // of tensor-parallel ranks
  if (stages == 0) stages = groups;
  ACC_CHECK(stages >= 1 && groups % stages == 0, "pipeline_config.stages: ", stages, " stages do not divide the ",
            world, " processes", tensor_parallel > 1 ? " over " + std::to_string(tensor_parallel) + " tensor-parallel ranks" : "",
            "; each stage runs on processes / (stages x tensor_parallel) replicas (0: one stage per ",
            tensor_parallel > 1 ? "tensor_parallel processes)" : "process)");
  const int replicas = groups / stages, group = rank / tensor_parallel;
  return {.stages = stages, .replicas = replicas, .tensor_parallel = tensor_parallel,
          .stage = group / replicas, .replica = group % replicas, .model = rank % tensor_parallel};
}

int StagePlan::stage_of_unit(int64_t unit) const {
  for (size_t s = 0; s < units.size(); ++s)
    if (unit >= units[s].first && unit < units[s].second) return static_cast<int>(s);
  ACC_FAIL("pipeline: unit ", unit, " of the chain is in no stage");
}

StagePlan plan_stages(const std::vector<int64_t>& unit_costs, int64_t first_cost, int64_t last_cost, int stages,
                      const std::vector<int64_t>& split_at, int ranks) {
  const auto n = static_cast<int64_t>(unit_costs.size());
  ACC_CHECK(stages >= 1 && stages <= n, "pipeline: ", stages, " stages need at least as many units; the chain has ", n);
  StagePlan plan;
  if (!split_at.empty()) {
    ACC_CHECK(static_cast<int>(split_at.size()) == stages - 1, "pipeline: ", stages, " stages need ", stages - 1,
              " split points, got ", split_at.size());
    int64_t begin = 0;
    for (int64_t at : split_at) {
      ACC_CHECK(at > begin && at < n, "pipeline: split points must rise strictly inside (0, ", n, "), got ", at);
      plan.units.emplace_back(begin, at);
      begin = at;
    }
    plan.units.emplace_back(begin, n);
    return plan;
  }
  std::vector<int64_t> prefix{0};
  for (int64_t c : unit_costs) prefix.push_back(prefix.back() + c);
  auto cost = [&](int s, int64_t begin, int64_t end) {
    return prefix[end] - prefix[begin] + (s == 0 ? first_cost : 0) + (s == stages - 1 ? last_cost : 0);
  };
  // best[s][e]: the least largest cost of stages 0..s covering units [0, e); from[s][e] the
  // first unit of stage s in it.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> best(stages, std::vector<int64_t>(n + 1, kNone)), from = best;
  for (int64_t e = 1; e <= n; ++e) best[0][e] = cost(0, 0, e);
  for (int s = 1; s < stages; ++s)
    for (int64_t e = s + 1; e <= n; ++e)
      for (int64_t b = s; b < e; ++b) {
        if (best[s - 1][b] == kNone) continue;
        const int64_t worst = std::max(best[s - 1][b], cost(s, b, e));
        if (worst < best[s][e]) {
          best[s][e] = worst;
          from[s][e] = b;
        }
      }
  std::vector<std::pair<int64_t, int64_t>> reversed;
  for (int64_t s = stages - 1, e = n; s >= 0; --s) {
    const int64_t b = s == 0 ? 0 : from[s][e];
    reversed.emplace_back(b, e);
    e = b;
  }
  plan.units.assign(reversed.rbegin(), reversed.rend());
  if (ranks > 0 && ranks < stages) balance_ranks(plan.units, ranks, n, cost);
  return plan;
}

std::string describe(const models::Structure::Chain& chain, const StagePlan& plan) {
  std::string out;
  for (int k = 0; k < plan.stages(); ++k) {
    const auto [begin, end] = plan.units[static_cast<size_t>(k)];
    out += (k ? "; " : "") + std::to_string(k) + ": " + unit_name(chain, plan, begin) +
           (end - begin > 1 ? " .. " + unit_name(chain, plan, end - 1) : "");
  }
  return out;
}

StagePlan plan_model_stages(const models::Structure::Chain& chain,
                            const std::vector<std::pair<std::string, int64_t>>& parameters,
                            const std::string& head_weight, int stages,
                            const std::vector<std::string>& split_points, int64_t layer_attention, int ranks) {
  const auto layers = static_cast<int64_t>(chain.layers.size());
  ACC_CHECK(layers > 0, "PIPELINE: the model declares no layers to cut into stages (models::Structure::chain)");
  const bool automatic = split_points.empty() || (split_points.size() == 1 && split_points[0] == "auto");
  // A split point naming a module of a layer's residual branch cuts the chain by branches;
  // otherwise it is cut by whole layers.
  const auto branches = static_cast<int>(chain.branches.size());
  auto branch_at = [&](const std::string& name) -> std::pair<int64_t, int> {  // {-1, 0}: none
    for (int64_t i = 0; i < layers; ++i)
      for (int j = 0; j < branches; ++j)
        for (const auto& m : chain.branches[static_cast<size_t>(j)])
          if (name == chain.layers[static_cast<size_t>(i)] + "." + m) return {i, j};
    return {-1, 0};
  };
  StagePlan plan{.parts = 1};
  if (!automatic && std::ranges::any_of(split_points, [&](const auto& n) { return branch_at(n).first >= 0; }))
    plan.parts = branches;
  const int64_t n = layers * plan.parts;
  const std::string cut_between = plan.parts == 1 ? std::string()
                                                  : " cut between their branches (" + unit_name(chain, plan, 0) + ", " +
                                                        unit_name(chain, plan, 1) + ", ...)";
  ACC_CHECK(stages <= n, "PIPELINE: ", stages, " stages (pipeline_config.stages, or one per process, times "
            "pipeline_config.stages_per_rank) but the model has only ", n, plan.parts > 1 ? " units (" : " layers (",
            layer_range(chain.layers), cut_between, "); use at most ", n, " stages");
  std::vector<int64_t> split_at;
  if (!automatic) {
    ACC_CHECK(static_cast<int>(split_points.size()) == stages - 1, "pipeline_config.split_points: ", stages,
              " stages need ", stages - 1, " split points (the first layer of each stage after the first), got ",
              split_points.size(), " (", util::join(split_points), ")");
    for (const auto& name : split_points) {
      const auto it = std::ranges::find(chain.layers, name);
      const auto [layer, branch] = branch_at(name);
      ACC_CHECK(it != chain.layers.end() || layer >= 0, "pipeline_config.split_points: '", name,
                "' is no layer of the model (its layers: ", layer_range(chain.layers), ")",
                branches > 1 ? ", nor a module of a layer's branches (" + chain.layers.front() + "." +
                                   chain.branches[1].back() + ")" : std::string());
      const int64_t at = layer >= 0 ? layer * plan.parts + branch : (it - chain.layers.begin()) * plan.parts;
      ACC_CHECK(at > 0 && (split_at.empty() || at > split_at.back()), "pipeline_config.split_points: '", name,
                "' must come after ", split_at.empty() ? "the first layer" : "the split point before it",
                " (stages are contiguous runs of layers, in order)");
      split_at.push_back(at);
    }
  }
  if (!split_at.empty()) {
    plan.units = plan_stages(std::vector<int64_t>(static_cast<size_t>(n), 0), 0, 0, stages, split_at).units;
    return plan;
  }
  // Automatic: whole layers, balanced by the products each computes per token.
  const ProductCosts costs = product_costs(chain, parameters, head_weight, layer_attention);
  plan.units = plan_stages(costs.layers, 0, costs.head, stages, {}, ranks).units;
  return plan;
}

std::vector<int64_t> stage_costs(const ChainParameters& parameters, const StagePlan& plan) {
  ACC_CHECK(plan.parts == 1, "pipeline: stage_costs counts whole layers, not a plan by branches");
  const ProductCosts costs =
      product_costs(parameters.chain, parameters.sizes, parameters.head, parameters.layer_attention);
  std::vector<int64_t> out;
  for (const auto& [begin, end] : plan.units)
    out.push_back(std::accumulate(costs.layers.begin() + begin, costs.layers.begin() + end, int64_t{0}));
  if (!out.empty()) out.back() += costs.head;
  return out;
}

StagePlan plan_model_stages(const ChainParameters& parameters, int stages, const std::vector<std::string>& split_points,
                            int ranks) {
  return plan_model_stages(parameters.chain, parameters.sizes, parameters.head, stages, split_points,
                           parameters.layer_attention, ranks);
}

ChainParameters chain_parameters(models::CausalLM& lm) {
  ChainParameters out{.chain = lm.structure().chain};
  const Tensor head = lm.head_weight();
  for (const auto& [name, p] : lm.named_parameters()) {
    out.sizes.emplace_back(name, p.numel());
    if (p.is_same(head)) out.head = name;
  }
  // The FLOPs a sequence's length adds are attention's (6 per parameter-equivalent: forward and
  // backward); the balance counts them at the longest sequence the model takes.
  const auto layers = static_cast<double>(std::max<size_t>(1, out.chain.layers.size()));
  const double attention = lm.train_flops_per_token(lm.max_seq_len()) - lm.train_flops_per_token(0);
  out.layer_attention = static_cast<int64_t>(std::max(0.0, attention) / 6.0 / layers);
  return out;
}

Tensor run_unit(models::CausalLM& lm, const models::Structure::Chain& chain, const StagePlan& plan, int64_t unit,
                const Tensor& x) {
  nn::Module& layer = lm.layers()[static_cast<size_t>(unit / plan.parts)];
  if (plan.parts == 1) return layer(x);
  return run_branch(layer, chain.branches[static_cast<size_t>(unit % plan.parts)], x);
}

std::map<std::string, std::vector<int>> rank_holders(std::map<std::string, std::vector<int>> stage_holders, int ranks) {
  for (auto& [_, stages] : stage_holders) {
    for (int& k : stages) k %= ranks;
    std::ranges::sort(stages);
    stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  }
  return stage_holders;
}

std::map<std::string, std::vector<int>> holders(const models::Structure::Chain& chain, const StagePlan& plan,
                                                const std::vector<std::pair<std::string, int64_t>>& parameters) {
  std::map<std::string, std::vector<int>> out;
  const int last = plan.stages() - 1;
  for (const auto& [name, _] : parameters) {
    std::vector<int> stages;
    for (size_t i = 0; i < chain.layers.size(); ++i) {
      if (!inside(name, chain.layers[i])) continue;
      int branch = 0;  // of a plan by branches: the one whose modules hold the parameter
      if (plan.parts > 1) {
        branch = -1;
        for (size_t j = 0; j < chain.branches.size(); ++j)
          for (const auto& m : chain.branches[j])
            if (inside(name, chain.layers[i] + "." + m)) branch = static_cast<int>(j);
        ACC_CHECK(branch >= 0, "PIPELINE: parameter '", name, "' is in none of its layer's branches (",
                  util::join(chain.branches.front()), " ...): the model's Structure::Chain::branches must name "
                  "every submodule of a layer that holds parameters");
      }
      stages.push_back(plan.stage_of_unit(static_cast<int64_t>(i) * plan.parts + branch));
    }
    for (const auto& m : chain.embedding)
      if (inside(name, m)) stages.push_back(0);
    for (const auto& m : chain.head)
      if (inside(name, m)) stages.push_back(last);
    ACC_CHECK(!stages.empty(), "PIPELINE: parameter '", name, "' is in no part of the model's chain (embedding ",
              util::join(chain.embedding), "; layers ", layer_range(chain.layers), "; head ", util::join(chain.head),
              ")");
    std::ranges::sort(stages);
    stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
    out.emplace(name, std::move(stages));
  }
  return out;
}

}  // namespace acc::pipeline
