#include "fsdp_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "acc/autograd/engine.h"
#include "acc/autograd/function.h"
#include "acc/autograd/grad_mode.h"
#include "acc/autograd/node.h"
#include "acc/ops/loss.h"
#include "acc/util/activity.h"

namespace acc::fsdp {

FsdpModel::FsdpModel(std::shared_ptr<models::Model> module, std::vector<UnitPlan> plans,
                     EngineOptions options)
    : ShardedModel("FSDP(" + options.strategy + ")", std::move(module)), options_(std::move(options)) {
  auto* lm = dynamic_cast<models::CausalLM*>(&this->module());
  const bool split_vocab = options_.vocab_parallel && lm && options_.groups.shard->size() > 1;
  const auto vocab_names = split_vocab ? plan_vocab_units(plans, *lm) : std::vector<std::string>{};
  for (auto& plan : plans) {
    units_.push_back(std::make_unique<FlatUnit>(
        plan.name.empty() ? "<root>" : plan.name, this->module(), plan.params,
        plan.replicated ? options_.replicated_groups : options_.groups,
        FlatUnit::Options{.compute_dtype = options_.compute_dtype,
                          .reduce_bf16 = options_.reduce_bf16,
                          .state_tier = plan.replicated ? memory::Tier::compute : options_.offload_tier,
                          .row_numel = plan.row_numel,
                          .bucket_numel = options_.bucket_numel,
                          .quantize_block = options_.quantize_block,
                          .gradient_wire = options_.gradient_wire,
                          .node_copies = options_.node_copies}));
    const bool own_boundary = !plan.replicated && !plan.name.empty();
    call_boundaries_.push_back(own_boundary ? plan.module : nullptr);
  }
  // The optimizer's pieces: each original parameter's overlap with this rank's shard.
  for (size_t u = 0; u < units_.size(); ++u) {
    const FlatUnit& unit = *units_[u];
    for (const auto& slot : unit.slots()) {
      const FlatUnit::Part part = unit.local_part(slot);
      if (!part.count) continue;
      const int64_t at = part.first - unit.shard_begin();  // in this rank's shard
      Piece piece{{slot.name, slot.shape, part.first - slot.offset,
                   unit.master().slice_flat(at, {part.count}), Tensor()},
                  u, at, decays(slot.shape)};
      piece.master.set_requires_grad(slot.view.requires_grad());
      piece.placements = unit.groups().placements;
      if (options_.compute_dtype != DType::f32)
        piece.compute = unit.compute_shard().slice_flat(at, {part.count});
      pieces_.push_back(std::move(piece));
    }
  }
  // Reductions in flight may hold as many gradient bytes as the largest wrapped unit has.
  for (size_t u = 0; u + 1 < units_.size(); ++u)
    reduce_window_ = std::max<int64_t>(reduce_window_, units_[u]->trainable_numel() * 4);
  order_position_.assign(units_.size(), -1);
  for (size_t u = 0; u < units_.size(); ++u) hook_unit(u);
  checkpoint_listed_modules();
  if (!vocab_names.empty()) install_vocab_ops(*lm, vocab_names);
  for (auto& unit : units_) unit->release();  // between steps only shards are held
}

FsdpModel::~FsdpModel() {
  for (auto& h : hooks_) h.remove();
  if (lm_) lm_->set_head_loss(nullptr);
}

std::vector<std::string> FsdpModel::plan_vocab_units(std::vector<UnitPlan>& plans, models::CausalLM& lm) {
  const std::string embedding = lm.structure().token_embedding;
  if (embedding.empty()) return {};
  const Tensor table = lm.submodule(embedding).param("weight"), head = lm.head_weight();
  std::vector<std::string> names;  // one when the head is tied to the embedding
  for (const auto& [name, p] : lm.named_parameters())
    if (p.is_same(table) || p.is_same(head)) names.push_back(name);
  // Where each is planned; an ignored module's weight stays whole, and so do the others then.
  std::vector<std::pair<UnitPlan*, size_t>> found;
  for (const auto& name : names)
    for (auto& plan : plans)
      for (size_t i = 0; i < plan.params.size(); ++i)
        if (plan.params[i].first == name) found.emplace_back(&plan, i);
  const bool all_sharded = found.size() == names.size() &&
                           std::none_of(found.begin(), found.end(), [](const auto& f) { return f.first->replicated; });
  if (!all_sharded) return {};
  std::vector<UnitPlan> vocab;
  for (auto& [plan, i] : found) {
    auto& [name, p] = plan->params[i];
    vocab.push_back(UnitPlan{"<vocabulary " + name + ">", nullptr, {{name, p}}, false, p.size(1)});
    p = Tensor();  // taken; erased below
  }
  for (auto& plan : plans)
    std::erase_if(plan.params, [](const auto& param) { return !param.second.defined(); });
  drop_empty_units(plans);
  plans.insert(plans.end() - 1, vocab.begin(), vocab.end());
  return names;
}

void FsdpModel::install_vocab_ops(models::CausalLM& lm, const std::vector<std::string>& names) {
  auto unit_of = [this](const Tensor& weight) {
    for (size_t u = 0; u < units_.size(); ++u)
      if (units_[u]->slots().size() == 1 && units_[u]->slots()[0].view.is_same(weight)) return u;
    ACC_FAIL(type_name(), ": no vocabulary unit holds ", weight.describe());
  };
  for (const auto& name : names) vocab_units_.push_back(unit_of(module().parameter(name)));
  nn::Module& lookup = lm.submodule(lm.structure().token_embedding);
  const size_t embedding = unit_of(lookup.param("weight")), head = unit_of(lm.head_weight());
  hooks_.push_back(lookup.add_call_wrapper(
      [this, embedding](nn::Module&, const Tensor& ids, const nn::Module::Inner& inner) {
        return units_[embedding]->gathered() ? inner(ids) : parallel::vocab_parallel_embedding(vocab_shard(embedding), ids);
      }));
  lm.set_head_loss([this, head](const Tensor& hidden, const Tensor& weight, const Tensor& labels) {
    return units_[head]->gathered() ? ops::linear_cross_entropy(hidden, weight, labels)
                                    : parallel::vocab_parallel_loss(vocab_shard(head), hidden, labels, ops::kIgnoreIndex);
  });
  lm_ = &lm;
}

parallel::VocabShard FsdpModel::vocab_shard(size_t u) {
  const FlatUnit& unit = *units_[u];
  const FlatUnit::Slot& slot = unit.slots()[0];
  const int64_t V = slot.shape[0], C = slot.shape[1], each = unit.shard_numel() / C;
  const int64_t first = unit.groups().shard->rank() * each, rows = std::clamp<int64_t>(V - first, 0, each);
  return parallel::VocabShard{unit.groups().shard, unit.compute_shard().slice_flat(0, {rows, C}).detach(), first, V,
                    slot.view.requires_grad(), [this, u](const Tensor& grad) {
                      first_gradient(u);
                      if (auto reduction = units_[u]->take_local_gradient(grad)) reduce(std::move(*reduction));
                    }};
}

bool FsdpModel::splits_vocab(const data::Batch& batch) const {
  return lm_ && phase_ != Phase::summoned && autograd::GradMode::is_enabled() && batch.contains("labels") &&
         !lm_->returns_logits();
}

void FsdpModel::hook_unit(size_t u) {
  FlatUnit& unit = *units_[u];
  for (size_t i = 0; i < unit.slots().size(); ++i) {
    const Tensor& view = unit.slots()[i].view;
    if (!view.requires_grad()) continue;
    hooks_.push_back(autograd::set_gradient_sink(view, [this, u, i](const Tensor& grad) {
      first_gradient(u);
      for (auto& reduction : units_[u]->take_gradient(i, grad)) reduce(std::move(reduction));
    }));
    hooks_.push_back(autograd::register_post_accumulate_hook(view, [this, u](Tensor&) {
      if (units_[u]->slot_done()) unit_backward_done(u);
    }));
  }
  nn::Module* boundary = call_boundaries_[u];
  if (!boundary) return;  // the root: gathered by forward(batch); the replicated unit: always
  const bool checkpointed = options_.activation_checkpointing || listed_for_checkpointing(*boundary);
  hooks_.push_back(boundary->add_call_wrapper(
      [this, u, checkpointed](nn::Module&, const Tensor& x, const nn::Module::Inner& inner) {
        FlatUnit& unit = *units_[u];
        unit.gather();
        // Summoned, or a recomputation in backward: the unit stays gathered.
        if (phase_ == Phase::summoned || autograd::in_backward()) return inner(x);
        calls_this_forward_.push_back(u);
        if (options_.forward_prefetch) prefetch(neighbour(u, +1));
        Tensor y = checkpointed ? autograd::checkpoint(inner, x) : inner(x);
        if (!options_.reshard_after_forward) return y;
        // Runs before any node of this unit's backward: every one of them feeds y.
        if (auto node = y.grad_fn())
          node->pre_hooks().add([this, u](const Tensor&) {
            units_[u]->gather();
            if (options_.backward_prefetch == BackwardPrefetch::BACKWARD_PRE) prefetch(neighbour(u, -1));
            return Tensor();
          });
        unit.reshard_after_forward();
        return y;
      }));
}

FlatUnit* FsdpModel::neighbour(size_t u, int offset) {
  const int at = order_position_[u];
  if (at < 0) return nullptr;
  const int64_t next = at + offset;
  if (next < 0 || next >= static_cast<int64_t>(forward_order_.size())) return nullptr;
  return units_[forward_order_[static_cast<size_t>(next)]].get();
}

// One unit ahead of the compute that issues it, so at most the root, the unit computing and
// the next one are gathered: the bound PyTorch's limit_all_gathers enforces. (Backward prefetch
// only runs when resharding after forward; otherwise units stay gathered until their backward.)
void FsdpModel::prefetch(FlatUnit* unit) {
  if (unit) unit->start_gather();
}

bool FsdpModel::listed_for_checkpointing(const nn::Module& m) const {
  const auto& listed = options_.checkpoint_classes;
  return std::find(listed.begin(), listed.end(), m.type_name()) != listed.end();
}

// Listed modules that are not units get a wrapper of their own; units are checkpointed by
// their unit wrapper, which also gathers them.
void FsdpModel::checkpoint_listed_modules() {
  if (options_.checkpoint_classes.empty()) return;
  std::set<std::string> present;
  for (auto& [name, m] : module().named_modules()) {
    present.insert(m->type_name());
    if (!listed_for_checkpointing(*m) ||
        std::find(call_boundaries_.begin(), call_boundaries_.end(), m) != call_boundaries_.end())
      continue;
    hooks_.push_back(m->add_call_wrapper([](nn::Module&, const Tensor& x, const nn::Module::Inner& inner) {
      return autograd::in_backward() ? inner(x) : autograd::checkpoint(inner, x);
    }));
  }
  for (const auto& cls : options_.checkpoint_classes) {
    if (present.count(cls)) continue;
    std::string classes;
    for (const auto& c : present) classes += (classes.empty() ? "" : ", ") + c;
    ACC_FAIL("fsdp_activation_checkpointing: no module of class '", cls, "' in ", module().type_name(),
             " (its classes: ", classes, ")");
  }
}

void FsdpModel::first_gradient(size_t u) {
  ACC_CHECK(phase_ != Phase::summoned, type_name(), ": a backward inside summon_full_params(), whose "
            "gradients no unit would reduce; evaluate there without gradients (NoGradGuard), or train "
            "outside the scope");
  units_[u]->begin_pass(pieces_have_grads(u), gradient_sync_);
  if (phase_ == Phase::backward) return;
  phase_ = Phase::backward;
  autograd::queue_callback([this] { finish_backward(); });
}

bool FsdpModel::pieces_have_grads(size_t u) const {
  for (const auto& piece : pieces_)
    if (piece.unit == u && piece.master.grad().defined()) return true;
  return false;
}

void FsdpModel::point_piece_grads(size_t u) {
  const Tensor& grad = units_[u]->grad();
  for (auto& piece : pieces_)
    if (piece.unit == u && piece.master.requires_grad())
      piece.master.set_grad(grad.slice_flat(piece.shard_offset, piece.master.shape()));
}

void FsdpModel::unit_backward_done(size_t u) {
  const bool synced = units_[u]->pass() == FlatUnit::Pass::reducing;
  for (auto& reduction : units_[u]->reduce_open_buckets()) reduce(std::move(reduction));
  units_[u]->end_pass();
  if (synced) point_piece_grads(u);  // a no_sync pass leaves the shards' gradients as they were
  if (u + 1 < units_.size()) {
    units_[u]->release();
    if (options_.backward_prefetch == BackwardPrefetch::BACKWARD_POST && options_.reshard_after_forward)
      prefetch(neighbour(u, -1));
  }
}

void FsdpModel::finish_backward() {
  phase_ = Phase::idle;
  // Units some of whose parameters got no gradient this pass, in the same order on every rank.
  for (size_t u = 0; u < units_.size(); ++u)
    if (units_[u]->pass() != FlatUnit::Pass::idle) unit_backward_done(u);
  land_reductions(0);
  // The root, and any unit prefetched whose backward did not come.
  for (auto& unit : units_) unit->release();
}

void FsdpModel::reduce(FlatUnit::Reduction reduction) {
  reducing_bytes_ += reduction.held_bytes();
  reducing_.push_back(std::move(reduction));
  land_reductions(reduce_window_);
}

void FsdpModel::land_reductions(int64_t keep_bytes) {
  while (!reducing_.empty() && (keep_bytes == 0 || reducing_bytes_ > keep_bytes)) {
    reducing_bytes_ -= reducing_.front().held_bytes();
    FlatUnit::Reduction oldest = std::move(reducing_.front());
    reducing_.pop_front();
    oldest.land();
  }
}

void FsdpModel::close_interrupted_backward() {
  if (phase_ != Phase::backward) return;
  phase_ = Phase::idle;
  for (auto& unit : units_) unit->end_pass();
  land_reductions(0);
}

models::ModelOutput FsdpModel::forward(const data::Batch& batch) {
  activity::Phase phase("forward");
  close_interrupted_backward();
  // Node copies of a forward whose backward never came hold the parameters before the
  // optimizer step: gathers must not use them again.
  for (auto& unit : units_) unit->forget_node_copy();
  root().gather();
  if (!splits_vocab(batch))
    for (size_t u : vocab_units_) units_[u]->gather();
  calls_this_forward_.clear();
  models::ModelOutput out = module().forward(batch);
  // Summoned, every unit stays whole (and the calls, which the wrappers do not record then,
  // say nothing about the training forward's order).
  if (phase_ == Phase::summoned) return out;
  if (calls_this_forward_ != forward_order_) {  // the first step, or the model took another path
    forward_order_ = calls_this_forward_;
    std::fill(order_position_.begin(), order_position_.end(), -1);
    for (size_t i = forward_order_.size(); i-- > 0;) order_position_[forward_order_[i]] = static_cast<int>(i);
  }
  if (!autograd::GradMode::is_enabled()) {  // no backward follows: shards only
    for (auto& unit : units_) unit->release();
  } else if (options_.reshard_after_forward) {  // units prefetched but not called this time
    for (size_t u = 0; u + 1 < units_.size(); ++u)
      if (call_boundaries_[u] && order_position_[u] < 0) units_[u]->release();
  }
  return out;
}

void FsdpModel::begin_full_params(bool writeback) {
  ACC_CHECK(phase_ != Phase::summoned, type_name(), ": summon_full_params() scopes do not nest");
  ACC_CHECK(!writeback || options_.compute_dtype == DType::f32, type_name(),
            ": summon_full_params(writeback) needs f32 compute; with bf16 the gathered parameters "
            "are rounded copies of the f32 masters");
  close_interrupted_backward();
  for (auto& unit : units_) {
    if (unit->quantizes_gathers()) unit->release();  // it may hold a training gather's int8 values
    unit->gather(FlatUnit::Precision::exact);
  }
  phase_ = Phase::summoned;
}

void FsdpModel::end_full_params(bool writeback) noexcept {
  phase_ = Phase::idle;
  if (writeback) {
    autograd::NoGradGuard no_grad;
    for (auto& unit : units_) unit->write_back();
  }
  for (auto& unit : units_) unit->release();
}

std::vector<std::pair<std::string, Tensor>> FsdpModel::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& piece : pieces_) out.emplace_back(piece.name, piece.master);
  return out;
}

std::vector<ShardedModel::ParameterPiece> FsdpModel::parameter_pieces() const {
  return {pieces_.begin(), pieces_.end()};
}

std::vector<optim::ParamGroup> FsdpModel::param_groups(double weight_decay) const {
  optim::ParamGroup decayed, plain;
  decayed.weight_decay = weight_decay;
  plain.weight_decay = 0.0;
  for (const auto& piece : pieces_) {
    if (!piece.master.requires_grad()) continue;
    optim::ParamGroup& g = piece.decays ? decayed : plain;
    g.params.push_back(piece.master);
    if (piece.compute.defined()) g.bf16_copies.push_back(piece.compute);
  }
  std::vector<optim::ParamGroup> groups;
  for (auto* g : {&decayed, &plain})
    if (!g->params.empty()) groups.push_back(std::move(*g));
  return groups;
}

void FsdpModel::visit_full_parameters(const FullParametersVisitor& visit) {
  autograd::NoGradGuard no_grad;
  for (auto& unit : units_) {
    const auto& group = unit->groups().shard;
    Tensor full = Tensor::empty({unit->shard_numel() * group->size()});
    group->all_gather(unit->master(), full);
    std::vector<std::pair<std::string, Tensor>> params;
    for (const auto& slot : unit->slots())
      params.emplace_back(slot.name, full.slice_flat(slot.offset, slot.shape));
    visit(params);
  }
}

std::vector<std::pair<std::string, Tensor>> FsdpModel::full_parameters() {
  std::map<std::string, Tensor> gathered;
  visit_full_parameters([&gathered](const std::vector<std::pair<std::string, Tensor>>& params) {
    for (const auto& [name, value] : params) gathered[name] = value.clone();
  });
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, _] : module().named_parameters()) out.emplace_back(name, gathered.at(name));
  return out;
}

}  // namespace acc::fsdp
