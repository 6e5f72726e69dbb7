#include "pipeline_model.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "acc/autograd/engine.h"
#include "acc/autograd/grad_mode.h"
#include "acc/memory/allocator.h"
#include "acc/nn/deferred_init.h"
#include "acc/ops/loss.h"
#include "acc/util/error.h"

namespace acc::pipeline {

// One microbatch of a training step: its rows of the batch, its share of the batch's loss, and
// what its forward left for its backward.
struct PipelineModel::Microbatch {
  int index = 0;
  data::Batch batch;
  double weight = 0;  // counted labels here / in the whole batch
  Tensor input;       // received activation (a leaf whose gradient goes back); none on the first stage
  Tensor output;      // sent activation, or the loss on the last stage
};

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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

// Tags of a microbatch's messages: its activation forward, its gradient back.
int activation_tag(int microbatch) { return 2 * microbatch; }
int gradient_tag(int microbatch) { return 2 * microbatch + 1; }
// An evaluation forward's activation: above every microbatch's (pipeline_config.microbatches
// stays below 16000; MPI promises tags up to 32767).
constexpr int kEvaluationTag = 32000;

// sum += g, in f32 whatever g's dtype, in a buffer counted as gradients (the first g copied).
void accumulate(Tensor& sum, const Tensor& g) {
  if (!sum.defined()) {
    memory::CategoryScope category(memory::Category::gradients);
    sum = g.to(DType::f32);
    return;
  }
  const Tensor add = g.dtype() == DType::f32 ? g : g.to(DType::f32);
  float* s = sum.data<float>();
  const float* a = add.data<float>();
  for (int64_t i = 0, n = sum.numel(); i < n; ++i) s[i] += a[i];
}

}  // namespace

PipelineModel::PipelineModel(std::shared_ptr<models::Model> model, std::shared_ptr<dist::ProcessGroup> world,
                             PipelineOptions options)
    : ShardedModel("Pipeline", std::move(model)),
      lm_(causal_lm(module())),
      world_(std::move(world)),
      options_(std::move(options)),
      link_(world_) {
  const models::Structure::Chain chain = module().structure().chain;
  const auto all = module().named_parameters();
  std::vector<std::pair<std::string, int64_t>> sizes;
  std::string head;
  const Tensor head_weight = lm_.head_weight();
  for (const auto& [name, p] : all) {
    sizes.emplace_back(name, p.numel());
    if (p.is_same(head_weight)) head = name;
  }
  plan_ = plan_model_stages(chain, sizes, head, world_->size(), options_.split_points);
  const auto held_by = holders(chain, plan_, sizes);
  autograd::NoGradGuard no_grad;
  memory::CategoryScope category(memory::Category::parameters);
  std::map<std::vector<int>, std::shared_ptr<dist::ProcessGroup>> groups;  // by holders, made on every rank
  for (const auto& [name, p] : all) {
    const std::vector<int>& stages = held_by.at(name);
    const bool mine = std::ranges::find(stages, stage()) != stages.end();
    if (stages.size() > 1 && !groups.count(stages))
      groups[stages] = world_->split(mine ? 0 : -1, 0, "pipeline tied " + name);
    if (!mine) {  // its shape stays (whole_parameter_shapes, FLOPs), its memory goes
      module().replace_parameter(name, Tensor::unallocated(p.shape(), p.dtype()));
      continue;
    }
    Held held{.name = name, .master = p, .holders = static_cast<int>(stages.size())};
    if (nn::is_deferred(p)) {
      Tensor values = Tensor::empty(p.shape(), p.dtype());
      nn::fill_part(p, 0, p.numel(), values.data<float>());
      module().replace_parameter(name, values);
      held.master = module().parameter(name);
    }
    if (options_.bf16) {
      module().replace_parameter(name, held.master.to(DType::bf16));
      held.compute = module().parameter(name);
    }
    if (stages.size() > 1) held.group = groups.at(stages);
    held_.push_back(std::move(held));
  }
  if (options_.bf16) module().set_compute_dtype(DType::bf16);
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
    optim::ParamGroup& group = decays(h.master.shape()) ? decayed : plain;
    group.params.push_back(h.master);
    if (h.compute.defined()) group.bf16_copies.push_back(h.compute);
  }
  return {decayed, plain};
}

std::vector<ShardedModel::ParameterPiece> PipelineModel::parameter_pieces() const {
  std::vector<ParameterPiece> pieces;
  for (const Held& h : held_) {
    ParameterPiece piece{.name = h.name, .shape = h.master.shape(), .master = h.master, .compute = h.compute};
    if (h.holders > 1) piece.placements = {{.axis = "pipeline", .kind = Placement::Kind::replicated, .ranks = h.holders}};
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

models::ModelOutput PipelineModel::forward(const data::Batch& batch) {
  const bool training_step = is_training() && autograd::GradMode::is_enabled() && batch.contains("labels");
  return training_step ? train_step(batch) : evaluate(batch);
}

Tensor PipelineModel::run_layers(Tensor x) {
  const auto [begin, end] = plan_.layers[static_cast<size_t>(stage())];
  const nn::ModuleList& layers = lm_.layers();
  for (int64_t i = begin; i < end; ++i) x = layers[static_cast<size_t>(i)](x);
  return x;
}

Tensor PipelineModel::stage_output(const Microbatch& micro) {
  Tensor x = run_layers(stage() == 0 ? lm_.embed(micro.batch["input_ids"]) : micro.input);
  if (stage() != plan_.stages() - 1) return x;
  return lm_.head_output(lm_.final_norm(x), micro.batch).loss;
}

void PipelineModel::run_forward(Microbatch& micro) {
  const bool last = stage() == plan_.stages() - 1;
  if (stage() > 0) {
    micro.input = link_.recv(stage() - 1, activation_tag(micro.index));
    micro.input.set_requires_grad(true);
  }
  // With checkpointing the last stage computes its loss in the backward right away: its
  // forward would only be thrown away.
  if (options_.activation_checkpointing && last) return;
  const auto start = Clock::now();
  Tensor out;
  if (options_.activation_checkpointing) {
    autograd::NoGradGuard no_grad;  // nothing kept but the input; the backward runs it again
    out = stage_output(micro);
  } else {
    out = micro.output = stage_output(micro);
  }
  timing_.busy_s += seconds_since(start);
  if (last)
    step_loss_ += micro.weight * static_cast<double>(out.item());
  else
    link_.send(out, stage() + 1, activation_tag(micro.index));
}

void PipelineModel::run_backward(Microbatch& micro, std::vector<Tensor>& grads) {
  const bool first = stage() == 0, last = stage() == plan_.stages() - 1;
  const Tensor received = last ? Tensor() : link_.recv(stage() + 1, gradient_tag(micro.index));
  const auto start = Clock::now();
  if (options_.activation_checkpointing) {
    micro.output = stage_output(micro);
    if (last) step_loss_ += micro.weight * static_cast<double>(micro.output.item());
  }
  const Tensor seed = last ? Tensor::from_vector({static_cast<float>(micro.weight)}, micro.output.shape()) : received;
  std::vector<Tensor> inputs;
  for (const Held& h : held_)
    if (h.master.requires_grad()) inputs.push_back(h.used());
  if (!first) inputs.push_back(micro.input);
  const std::vector<Tensor> got = autograd::grad(micro.output, seed, inputs);
  for (size_t i = 0; i < grads.size(); ++i)
    if (got[i].defined()) accumulate(grads[i], got[i]);
  timing_.busy_s += seconds_since(start);
  if (!first) {
    const Tensor& dx = got.back();
    link_.send(dx.defined() ? dx : Tensor::zeros(micro.input.shape(), micro.input.dtype()), stage() - 1,
               gradient_tag(micro.index));
  }
  micro.input = micro.output = Tensor();  // its activations go now
}

models::ModelOutput PipelineModel::train_step(const data::Batch& batch) {
  const auto start = Clock::now();
  timing_ = {};
  step_loss_ = 0;
  const Tensor& labels = batch["labels"];
  const int64_t rows = labels.size(0), m = options_.microbatches;
  ACC_CHECK(rows % m == 0, "pipeline_config.microbatches: ", m, " microbatches do not divide the batch of ", rows,
            " rows; use a batch size that is a multiple of ", m, " or a number of microbatches that divides ", rows);
  const double total = static_cast<double>(std::max<int64_t>(1, counted_labels(labels)));
  std::vector<Microbatch> micro(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) {
    auto& mb = micro[static_cast<size_t>(j)];
    mb.index = static_cast<int>(j);
    for (const auto& [name, t] : batch.tensors()) mb.batch.set(name, t.narrow(j * (rows / m), rows / m).clone());
    mb.weight = static_cast<double>(counted_labels(mb.batch["labels"])) / total;
  }
  std::vector<Tensor> grads;
  for (const Held& h : held_)
    if (h.master.requires_grad()) grads.emplace_back();
  for (const Action& a : stage_actions(options_.schedule, stage(), plan_.stages(), static_cast<int>(m))) {
    Microbatch& mb = micro[static_cast<size_t>(a.microbatch)];
    if (mb.weight == 0) continue;  // no label counts here, on any stage: nothing to add
    if (a.kind == Action::Kind::forward)
      run_forward(mb);
    else
      run_backward(mb, grads);
  }
  link_.flush();
  // A tied parameter's gradient is the sum of its stages'.
  std::vector<std::pair<Tensor, Tensor>> gradients;
  size_t k = 0;
  for (const Held& h : held_) {
    if (!h.master.requires_grad()) continue;
    Tensor& g = grads[k++];
    if (h.group) {
      if (!g.defined()) g = Tensor::zeros(h.master.shape());
      h.group->all_reduce(g);
    }
    if (g.defined()) gradients.emplace_back(h.master, g);
  }
  Tensor loss = Tensor::from_vector({static_cast<float>(step_loss_)}, {1});
  world_->broadcast(loss, plan_.stages() - 1);
  timing_.step_s = seconds_since(start);
  return own_step(Tensor::from_vector({loss.item()}, {}), std::move(gradients));
}

models::ModelOutput PipelineModel::evaluate(const data::Batch& batch) {
  autograd::NoGradGuard no_grad;
  const bool first = stage() == 0, last = stage() == plan_.stages() - 1;
  Tensor x = first ? lm_.embed(batch["input_ids"]) : link_.recv(stage() - 1, kEvaluationTag);
  x = run_layers(x);
  models::ModelOutput out;
  if (last)
    out = lm_.head_output(lm_.final_norm(x), batch);
  else
    link_.send(x, stage() + 1, kEvaluationTag);
  link_.flush();
  return share_output(out);
}

models::ModelOutput PipelineModel::share_output(const models::ModelOutput& out) {
  // What the last stage has: [logits?, loss?, dtype, rank, dims...].
  const int last = plan_.stages() - 1;
  std::vector<int64_t> header(9, 0);
  if (stage() == last) {
    header[0] = out.logits.defined();
    header[1] = out.loss.defined();
    if (out.logits.defined()) {
      header[2] = static_cast<int64_t>(out.logits.dtype());
      header[3] = out.logits.dim();
      ACC_CHECK(out.logits.dim() <= 5, "pipeline: logits ", out.logits.describe(), " of more than 5 dims");
      for (int64_t d = 0; d < out.logits.dim(); ++d) header[static_cast<size_t>(4 + d)] = out.logits.size(d);
    }
  }
  Tensor h = Tensor::from_vector_i64(header, {9});
  world_->broadcast(h, last);
  header = h.to_vector_i64();
  models::ModelOutput shared = out;
  if (header[0]) {
    if (stage() != last) {
      memory::CategoryScope category(memory::Category::activations);
      shared.logits = Tensor::empty(Shape(header.begin() + 4, header.begin() + 4 + header[3]),
                                    static_cast<DType>(header[2]));
    }
    world_->broadcast(shared.logits, last);
  }
  if (header[1]) {
    Tensor loss = Tensor::from_vector({stage() == last ? out.loss.item() : 0.f}, {1});
    world_->broadcast(loss, last);
    shared.loss = Tensor::from_vector({loss.item()}, {});
  }
  return shared;
}

}  // namespace acc::pipeline
