#include "pipeline_model.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <utility>

#include "acc/autograd/engine.h"
#include "acc/autograd/grad_math.h"
#include "acc/autograd/grad_mode.h"
#include "acc/autograd/row_gradients.h"
#include "acc/autograd/split_grad.h"
#include "acc/memory/allocator.h"
#include "acc/nn/deferred_init.h"
#include "acc/ops/elementwise.h"
#include "acc/ops/loss.h"
#include "acc/util/error.h"
#include "acc/util/log.h"
#include "acc/util/profiler.h"
#include "common/axis_names.h"
#include "common/structure_sharding.h"

namespace acc::pipeline {

// One microbatch of a training step: its rows of the batch, its share of the batch's loss, and
// what its forward left for its backward.
struct PipelineModel::Microbatch {
  int index = 0;
  data::Batch batch;
  double weight = 0;  // counted labels here / in the whole batch
  // Per chunk of this rank: the received activation (a leaf whose gradient goes back; none on
  // the first stage), and the sent activation or, on the last stage, the loss.
  std::vector<Tensor> input, output;
  // Per chunk, under zero_bubble: the weights' part of the backward, between its B and its W.
  std::vector<autograd::WeightGradients> weights;
};

namespace {

using Clock = Timeline::Clock;

int64_t counted_labels(const Tensor& labels) {
  int64_t n = 0;
  for (int64_t label : labels.to_vector_i64()) n += label != ops::kIgnoreIndex;
  return n;
}

models::CausalLM& causal_lm(models::Model& model) {
  auto* lm = dynamic_cast<models::CausalLM*>(&model);
  ACC_CHECK(lm, "PIPELINE: ", model.type_name(), " is not a causal language model (models::CausalLM); the pipeline "
            "cuts a model's chain of layers (embed, layers, final norm, head) into stages");
  return *lm;
}

// Tags of the messages into virtual stage `stage` for a microbatch: its activation, and its
// gradient coming back (below kEvaluationTag).
int activation_tag(int stage, int microbatches, int microbatch) { return 2 * (stage * microbatches + microbatch); }
int gradient_tag(int stage, int microbatches, int microbatch) {
  return activation_tag(stage, microbatches, microbatch) + 1;
}

// sum += g, in f32 whatever g's dtype, in a buffer counted as gradients (the first g copied).
void accumulate(Tensor& sum, const Tensor& g) {
  if (sum.defined()) return autograd::add_into(sum, g);
  memory::CategoryScope category(memory::Category::gradients);
  sum = g.to(DType::f32);
}

}  // namespace

PipelineModel::PipelineModel(std::shared_ptr<models::Model> model, std::shared_ptr<dist::ProcessGroup> world,
                             PipelineOptions options)
    : ShardedModel("Pipeline", std::move(model)),
      lm_(causal_lm(module())),
      world_(std::move(world)),
      options_(std::move(options)),
      grid_(checked_grid(options_, world_->size(), world_->rank())),
      // One pipeline per replica and tensor-parallel rank: the ranks with its coordinates.
      pipe_(world_->size() == grid_.stages
                ? world_
                : world_->split(grid_.replica * grid_.tensor_parallel + grid_.model, grid_.stage, "pipeline")),
      link_(pipe_) {
  const int T = grid_.tensor_parallel;
  if (grid_.replicas > 1) fsdp_ = world_->split(grid_.stage * T + grid_.model, grid_.replica, "pipeline stage fsdp");
  if (T > 1) {
    auto group = world_->split(grid_.stage * grid_.replicas + grid_.replica, grid_.model, "pipeline stage model");
    tensor_parallel_ = std::make_unique<parallel::TensorParallel>(kStrategy, module(),
                                                                  parallel::structure_sharding(module()), group);
  }
  const auto all = module().named_parameters();
  const ChainParameters parameters = chain_parameters(lm_);
  chain_ = parameters.chain;
  const int virtual_stages = grid_.stages * options_.stages_per_rank;
  plan_ = plan_model_stages(parameters, virtual_stages, options_.split_points, grid_.stages);
  if (world_->rank() == 0 && virtual_stages > 1)
    log::info("PIPELINE: {} stages: {}", virtual_stages, describe(chain_, plan_));
  const auto held_by = rank_holders(holders(parameters.chain, plan_, parameters.sizes), grid_.stages);
  autograd::NoGradGuard no_grad;
  memory::CategoryScope category(memory::Category::parameters);
  std::map<std::vector<int>, std::shared_ptr<dist::ProcessGroup>> groups;  // by holders, made on every rank
  for (const auto& [name, p] : all) {
    const std::vector<int>& ranks = held_by.at(name);  // of the pipeline
    const bool mine = std::ranges::find(ranks, stage()) != ranks.end();
    if (ranks.size() > 1 && !groups.count(ranks))  // the holders of one replica and tensor-parallel rank
      groups[ranks] = world_->split(mine ? grid_.replica * T + grid_.model : -1, 0, "pipeline tied " + name);
    if (!mine) {  // its shape stays (whole_parameter_shapes, FLOPs), its memory goes
      module().replace_parameter(name, Tensor::unallocated(p.shape(), p.dtype()));
      continue;
    }
    Held held{.name = name, .shape = p.shape(), .master = p, .holders = static_cast<int>(ranks.size())};
    if (nn::is_deferred(p)) {
      Tensor whole = Tensor::empty(p.shape(), p.dtype());
      nn::fill_part(p, 0, p.numel(), whole.data<float>());
      module().replace_parameter(name, whole);
    }
    if (const auto* split = tensor_parallel_ ? tensor_parallel_->split_of(name) : nullptr)
      module().replace_parameter(name, parallel::take_slice(module().parameter(name), *split, grid_.model, T));
    held.master = module().parameter(name);
    if (options_.bf16) {
      module().replace_parameter(name, held.master.to(DType::bf16));
      held.compute = module().parameter(name);
    }
    if (ranks.size() > 1) held.group = groups.at(ranks);
    held_.push_back(std::move(held));
  }
  if (options_.bf16) module().set_compute_dtype(DType::bf16);
  if (tensor_parallel_) tensor_parallel_->install();
  if (!fsdp_) return;
  // Over the stage's replicas each rank keeps a range of every master; the module computes with
  // the whole parameters, gathered before each forward.
  std::vector<Tensor> whole, f32;
  for (const Held& h : held_) {
    whole.push_back(module().parameter(h.name));
    f32.push_back(h.master);
  }
  shards_.emplace(std::move(whole), f32, fsdp_);
  for (size_t i = 0; i < held_.size(); ++i) {
    held_[i].compute = shards_->whole(i);
    held_[i].master = shards_->master(i);
    held_[i].begin = shards_->begin(i);
  }
}

std::vector<std::pair<std::string, Tensor>> PipelineModel::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Held& h : held_) out.emplace_back(h.name, h.master);
  return out;
}

std::vector<optim::ParamGroup> PipelineModel::param_groups(double weight_decay) const {
  optim::ParamGroup decayed{.weight_decay = weight_decay}, plain{.weight_decay = 0.0};
  for (const Held& h : held_) {
    if (!h.master.requires_grad()) continue;
    optim::ParamGroup& group = decays(h.shape) ? decayed : plain;
    group.params.push_back(h.master);
    if (optimizer_writes_compute()) group.bf16_copies.push_back(h.compute);
  }
  return {decayed, plain};
}

std::vector<ShardedModel::ParameterPiece> PipelineModel::parameter_pieces() const {
  std::vector<ParameterPiece> pieces;
  for (const Held& h : held_) {
    ParameterPiece piece{.name = h.name, .shape = h.shape, .begin = h.begin, .master = h.master,
                         .compute = optimizer_writes_compute() ? h.compute : Tensor()};
    if (fsdp_) piece.placements.push_back({.axis = "fsdp", .kind = Placement::Kind::sharded, .ranks = grid_.replicas});
    if (h.holders > 1)
      piece.placements.push_back({.axis = "pipeline", .kind = Placement::Kind::replicated, .ranks = h.holders});
    if (tensor_parallel_) {
      const auto* split = tensor_parallel_->split_of(h.name);
      if (split) piece.slice = tensor_parallel_->slice_held(*split);
      piece.placements.push_back({.axis = parallel::kModelAxis,
                                  .kind = split ? Placement::Kind::split : Placement::Kind::replicated,
                                  .ranks = grid_.tensor_parallel});
    }
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

std::vector<std::pair<std::string, Shape>> PipelineModel::whole_parameter_shapes() const {
  auto shapes = ShardedModel::whole_parameter_shapes();
  if (tensor_parallel_)
    for (auto& [name, shape] : shapes)
      if (const auto* split = tensor_parallel_->split_of(name)) shape = split->full_shape;
  return shapes;
}

void PipelineModel::begin_full_params(bool writeback) {
  ShardedModel::begin_full_params(writeback);
  if (tensor_parallel_) tensor_parallel_->step_aside();
}

void PipelineModel::end_full_params(bool writeback) noexcept {
  if (tensor_parallel_) tensor_parallel_->step_in();
  ShardedModel::end_full_params(writeback);
}

models::ModelOutput PipelineModel::forward(const data::Batch& batch) {
  if (shards_) shards_->gather();  // the masters may have moved since (a step, a load)
  const bool training_step = is_training() && autograd::GradMode::is_enabled() && batch.contains("labels");
  return training_step ? train_step(batch) : evaluate(batch);
}

int PipelineModel::virtual_stage(int chunk) const { return chunk * grid_.stages + stage(); }

Tensor PipelineModel::run_layers(Tensor x, int virtual_stage) {
  const auto [begin, end] = plan_.units[static_cast<size_t>(virtual_stage)];
  for (int64_t u = begin; u < end; ++u) x = run_unit(lm_, chain_, plan_, u, x);
  return x;
}

Tensor PipelineModel::stage_output(const Microbatch& micro, int chunk) {
  const int k = virtual_stage(chunk);
  Tensor x = run_layers(k == 0 ? lm_.embed(micro.batch["input_ids"]) : micro.input[static_cast<size_t>(chunk)], k);
  if (k != plan_.stages() - 1) return x;
  return lm_.head_output(lm_.final_norm(x), micro.batch).loss;
}

void PipelineModel::run_forward(Microbatch& micro, const Action& action) {
  const auto c = static_cast<size_t>(action.chunk);
  const int k = virtual_stage(action.chunk), m = options_.microbatches, p = grid_.stages;
  const bool last = k == plan_.stages() - 1;
  if (k > 0) {
    micro.input[c] = link_.recv((stage() + p - 1) % p, activation_tag(k, m, micro.index));
    micro.input[c].set_requires_grad(true);
  }
  // With checkpointing the last stage computes its loss in the backward right away: its
  // forward would only be thrown away.
  if (options_.activation_checkpointing && last) return;
  const auto start = Clock::now();
  Tensor out;
  {
    profiler::Scope computing("pipeline.compute");
    if (options_.activation_checkpointing) {
      autograd::NoGradGuard no_grad;  // nothing kept but the input; the backward runs it again
      out = stage_output(micro, action.chunk);
    } else {
      out = micro.output[c] = stage_output(micro, action.chunk);
    }
  }
  timeline_.record(action, start, Clock::now());
  if (last)
    step_loss_ += micro.weight * static_cast<double>(out.item());
  else
    link_.send(out, (stage() + 1) % p, activation_tag(k + 1, m, micro.index));
}

void PipelineModel::run_backward(Microbatch& micro, const Action& action, std::vector<Tensor>& grads) {
  const auto c = static_cast<size_t>(action.chunk);
  const int k = virtual_stage(action.chunk), m = options_.microbatches, p = grid_.stages;
  const bool first = k == 0, last = k == plan_.stages() - 1;
  const Tensor received = last ? Tensor() : link_.recv((stage() + 1) % p, gradient_tag(k, m, micro.index));
  const auto start = Clock::now();
  std::optional<profiler::Scope> computing(std::in_place, "pipeline.compute");
  if (options_.activation_checkpointing) {
    micro.output[c] = stage_output(micro, action.chunk);
    if (last) step_loss_ += micro.weight * static_cast<double>(micro.output[c].item());
  }
  const Tensor& output = micro.output[c];
  const Tensor seed = last ? Tensor::from_vector({static_cast<float>(micro.weight)}, output.shape()) : received;
  const std::vector<Tensor> weights = trained_weights();
  const std::vector<Tensor> inputs = first ? std::vector<Tensor>{} : std::vector<Tensor>{micro.input[c]};
  Tensor dx;
  // A first stage whose parameters are all frozen has nothing to differentiate.
  if (output.requires_grad() && options_.schedule == Schedule::zero_bubble) {
    auto split = autograd::split_grad(output, seed, inputs, weights);  // the weights' part waits for its W
    add_weight_gradients(split.weights_now, grads);
    if (!first) dx = split.inputs.back();
    micro.weights[c] = std::move(split.weights);
  } else if (output.requires_grad()) {
    std::vector<Tensor> all = weights;
    all.insert(all.end(), inputs.begin(), inputs.end());
    const std::vector<Tensor> got = autograd::grad(output, seed, all);
    add_weight_gradients(got, grads);
    if (!first) dx = got.back();
  }
  computing.reset();
  timeline_.record(action, start, Clock::now());
  if (!first)
    link_.send(dx.defined() ? dx : Tensor::zeros(micro.input[c].shape(), micro.input[c].dtype()), (stage() + p - 1) % p,
               gradient_tag(k - 1, m, micro.index));
  micro.input[c] = micro.output[c] = Tensor();  // its activations go now (under zero_bubble: but the Ws')
}

void PipelineModel::run_weight(Microbatch& micro, const Action& action, std::vector<Tensor>& grads) {
  auto& part = micro.weights[static_cast<size_t>(action.chunk)];
  if (!part.pending()) return;  // nothing trained on this stage
  const auto start = Clock::now();
  {
    profiler::Scope computing("pipeline.compute");
    add_weight_gradients(part.compute(), grads);
  }
  timeline_.record(action, start, Clock::now());
}

std::vector<Tensor> PipelineModel::trained_weights() const {
  std::vector<Tensor> out;
  for (const Held& h : held_)
    if (h.master.requires_grad()) out.push_back(h.used());
  return out;
}

void PipelineModel::add_weight_gradients(const std::vector<Tensor>& got, std::vector<Tensor>& grads) const {
  size_t next = 0;  // got holds the trained parameters' gradients first, in held_'s order
  for (size_t i = 0; i < held_.size(); ++i)
    if (held_[i].master.requires_grad()) {
      if (got[next].defined()) accumulate(grads[i], got[next]);
      ++next;
    }
}

models::ModelOutput PipelineModel::train_step(const data::Batch& batch) {
  timeline_.begin_step();
  step_loss_ = 0;
  const Tensor& labels = batch["labels"];
  const int64_t rows = labels.size(0), m = options_.microbatches;
  check_microbatches(rows, static_cast<int>(m), grid_.replicas);
  const double total = static_cast<double>(std::max<int64_t>(1, counted_labels(labels)));
  std::vector<Microbatch> micro(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) {
    auto& mb = micro[static_cast<size_t>(j)];
    mb.index = static_cast<int>(j);
    for (const auto& [name, t] : batch.tensors()) mb.batch.set(name, t.narrow(j * (rows / m), rows / m).clone());
    mb.weight = static_cast<double>(counted_labels(mb.batch["labels"])) / total;
    mb.input.resize(static_cast<size_t>(options_.stages_per_rank));
    mb.output.resize(static_cast<size_t>(options_.stages_per_rank));
    mb.weights.resize(static_cast<size_t>(options_.stages_per_rank));
  }
  std::vector<Tensor> grads(held_.size());  // whole, f32, summed over the microbatches
  // A lookup table's rows (the embedding's) are added into its sum as each backward makes them,
  // not as a dense [V, C] gradient per microbatch (row_gradients.h).
  const autograd::RowGradients table_rows([&](const TensorImpl* table) {
    for (size_t i = 0; i < held_.size(); ++i) {
      if (!held_[i].master.requires_grad() || held_[i].used().impl().get() != table) continue;
      if (!grads[i].defined()) {
        memory::CategoryScope category(memory::Category::gradients);
        grads[i] = Tensor::zeros(held_[i].used().shape(), DType::f32);
      }
      return grads[i];
    }
    return Tensor();
  });
  const auto schedule_start = Clock::now();
  for (const Action& a : stage_actions(options_.schedule, stage(), grid_.stages, static_cast<int>(m),
                                      options_.stages_per_rank)) {
    Microbatch& mb = micro[static_cast<size_t>(a.microbatch)];
    if (mb.weight == 0) continue;  // no label counts here, on any stage: nothing to add
    switch (a.kind) {
      case Action::Kind::forward: run_forward(mb, a); break;
      case Action::Kind::backward: run_backward(mb, a, grads); break;
      case Action::Kind::weight: run_weight(mb, a, grads); break;
    }
  }
  link_.flush();
  // The schedule's wall time, which the compute marks inside it (not nested in it) leave a
  // bubble of; counted beside them, not as a share.
  if (profiler::enabled())
    profiler::add("pipeline.schedule", std::chrono::duration<double>(Clock::now() - schedule_start).count(), true);
  // The batch's loss on every rank: the mean of the replicas' last stages' (each of a stage's
  // tensor-parallel ranks has it whole).
  Tensor loss = Tensor::from_vector({stage() == grid_.stages - 1 ? static_cast<float>(step_loss_) : 0.f}, {1});
  world_->all_reduce(loss);
  loss = Tensor::from_vector({loss.item() / static_cast<float>(grid_.replicas * grid_.tensor_parallel)}, {});
  timeline_.end_step(world_->rank());
  std::vector<Tensor> trained;
  for (const Held& h : held_)
    if (h.master.requires_grad()) trained.push_back(h.master);
  // The gradients reach the masters when the user's backward runs (communicated there, so that
  // no_sync can keep them).
  return own_step(loss, std::move(trained),
                  [this, grads = std::move(grads)](double scale) mutable { return finish_gradients(grads, scale); });
}

bool PipelineModel::communicates_gradients() const {
  return shards_ || std::ranges::any_of(held_, [](const Held& h) { return h.group != nullptr; });
}

std::vector<Tensor> PipelineModel::finish_gradients(std::vector<Tensor>& grads, double scale) {
  for (Tensor& g : grads)
    if (g.defined() && scale != 1.0) g = ops::scale(g, scale);
  if (pending_.empty()) pending_.resize(held_.size());
  std::vector<Tensor> out;  // one per trained master
  if (!sync_ && communicates_gradients()) {  // no_sync: summed here, whole, until a step syncs
    for (size_t i = 0; i < held_.size(); ++i) {
      if (grads[i].defined()) accumulate(pending_[i], grads[i]);
      if (held_[i].master.requires_grad()) out.emplace_back();
    }
    return out;
  }
  for (size_t i = 0; i < held_.size(); ++i) {
    if (!pending_[i].defined()) continue;
    if (grads[i].defined()) autograd::add_into(pending_[i], grads[i]);
    grads[i] = std::exchange(pending_[i], Tensor());
  }
  // Over a stage's replicas, this rank's range of their mean; then a tied parameter's is the sum
  // of its stages' (the same range on each: it crosses nodes a range at a time, not whole).
  if (shards_) grads = shards_->reduce(grads);
  for (size_t i = 0; i < held_.size(); ++i) {
    if (!held_[i].group || !held_[i].master.requires_grad()) continue;
    if (!grads[i].defined()) grads[i] = Tensor::zeros(held_[i].master.shape());
    held_[i].group->all_reduce(grads[i]);
  }
  for (size_t i = 0; i < held_.size(); ++i)
    if (held_[i].master.requires_grad()) out.push_back(grads[i]);
  return out;
}

models::ModelOutput PipelineModel::evaluate(const data::Batch& batch) {
  autograd::NoGradGuard no_grad;
  const int p = grid_.stages;
  models::ModelOutput out;
  for (int c = 0; c < options_.stages_per_rank; ++c) {  // round the ranks once per chunk
    const int k = virtual_stage(c);
    Tensor x = k == 0 ? lm_.embed(batch["input_ids"]) : link_.recv((stage() + p - 1) % p, kEvaluationTag + k);
    x = run_layers(x, k);
    if (k == plan_.stages() - 1) {
      out = lm_.head_output(lm_.final_norm(x), batch);
      if (tensor_parallel_ && tensor_parallel_->splits_vocabulary())  // each rank made its vocabulary's logits
        out.logits = tensor_parallel_->gather_vocabulary(out.logits);
    } else
      link_.send(x, (stage() + 1) % p, kEvaluationTag + k + 1);
  }
  link_.flush();
  return share_output(out);
}

models::ModelOutput PipelineModel::share_output(const models::ModelOutput& out) {
  const int last = grid_.stages - 1;  // the pipeline's last rank holds the last stage
  Tensor loss = link_.broadcast(out.loss, last);
  return {.logits = link_.broadcast(out.logits, last), .loss = loss};
}

}  // namespace acc::pipeline
