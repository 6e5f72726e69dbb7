#include "common/tensor_parallel.h"

#include <cstring>
#include <map>
#include <numeric>

#include "acc/autograd/grad_mode.h"
#include "acc/nn/layers.h"
#include "acc/ops/ops.h"
#include "acc/util/log.h"
#include "common/model_axis_ops.h"
#include "common/vocab_parallel.h"
#include "common/axis_names.h"

namespace acc::parallel {

namespace {

// The dimension `spec` splits over `model`, or -1.
int model_dim(const std::string& who, const std::string& name, const spmd::PartitionSpec& spec) {
  for (size_t d = 0; d < spec.dims.size(); ++d)
    for (const auto& axis : spec.dims[d])
      if (axis == kModelAxis) {
        ACC_CHECK(spec.dims[d].size() == 1, who, ": ", name, " ", spec.to_string(),
                  ": tensor parallelism splits a dimension over `model` alone, not together with "
                  "another axis");
        return static_cast<int>(d);
      }
  return -1;
}

// The indices `held` names along its dim, copied from `full` into `slice` in order (the two of
// one dtype): memcpy of contiguous runs, nothing allocated.
void copy_held(const Tensor& full, const ShardedModel::DimSlice& held, const Tensor& slice) noexcept {
  const auto dim = static_cast<size_t>(held.dim);
  const Shape& shape = full.shape();
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(full.dtype()));  // inner in bytes
  for (size_t d = 0; d < dim; ++d) outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  const auto* src = static_cast<const char*>(full.raw_data());
  auto* dst = static_cast<char*>(slice.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    const char* from = src + o * shape[dim] * inner;
    for (const auto& [begin, end] : held.blocks) {
      std::memcpy(dst, from + begin * inner, static_cast<size_t>((end - begin) * inner));
      dst += (end - begin) * inner;
    }
  }
}

// The first of rank `rank`'s rows when `extent` rows are split over `size` ranks (split_sizes).
int64_t first_of(int64_t extent, int rank, int size) {
  const auto rows = split_sizes(extent, size);
  return std::accumulate(rows.begin(), rows.begin() + rank, int64_t{0});
}

std::pair<std::string, std::string> owner_and_local(const std::string& name) {
  const auto dot = name.rfind('.');
  if (dot == std::string::npos) return {"", name};
  return {name.substr(0, dot), name.substr(dot + 1)};
}

}  // namespace

TensorParallel::TensorParallel(std::string who, models::Model& model, const spmd::ResolvedSharding& sharding,
                               std::shared_ptr<dist::ProcessGroup> group)
    : who_(std::move(who)), group_(std::move(group)) {
  const int n = group_->size();
  std::map<std::string, nn::Module*> modules;
  for (auto& [path, m] : model.named_modules()) modules[path] = m;
  auto* lm = dynamic_cast<models::CausalLM*>(&model);
  const Tensor head = lm ? lm->head_weight() : Tensor();
  const models::Structure structure = model.structure();
  std::map<const nn::Module*, bool> column;  // the Linears whose weight is split, and how
  for (const auto& [name, spec] : sharding.parameters) {
    const int dim = model_dim(who_, name, spec);
    if (dim < 0) continue;
    const auto [path, local] = owner_and_local(name);
    const nn::Module* owner = modules.at(path);
    const Tensor p = model.parameter(name);
    const bool linear = owner->type_name() == nn::Linear::kTypeName,
               embedding = owner->type_name() == nn::Embedding::kTypeName;
    if (linear && local == "weight" && dim <= 1) {
      column[owner] = dim == 0;
    } else if (embedding && local == "weight" && dim <= 1) {
      ACC_CHECK(dim == 0 || !(head.defined() && p.is_same(head)), who_, ": ", name, " ", spec.to_string(),
                " splits the token embedding by width over `model`, but it is also the causal LM head (tied), ",
                "which tensor parallelism splits over the vocabulary: [model, ...]");
      embeddings_.push_back({modules.at(path), p.size(dim), dim == 1});
    } else if (!(linear && local == "bias")) {  // a bias is checked with its weight below
      ACC_FAIL(who_, ": no rule runs ", owner->type_name(), " '", path, "' with ", name, " ",
               spec.to_string(), " (", p.describe(), ") split over `model`: tensor parallelism ",
               "splits a Linear's weight on dim 0 (column-parallel) or dim 1 (row-parallel), an "
               "Embedding's over its rows (the vocabulary) or its width, and the causal LM head over the "
               "vocabulary");
    }
    if (dim == 0 && head.defined() && p.is_same(head)) {  // the head's own Linear, or a tied embedding
      vocab_parallel_head_ = true;
      head_owner_ = lm;
    }
    // Packed tensors (attention's q, k, v) must split evenly, so every rank holds whole heads
    // of each; a plain dim splits as evenly as it can (split_sizes).
    const int sections = dim == 0 ? structure.packed_sections(name) : 1;
    ACC_CHECK(sections == 1 || p.size(dim) % (static_cast<int64_t>(sections) * n) == 0, who_, ": ",
              name, " ", spec.to_string(), ": dim ", dim, " of ", p.describe(), " packs ", sections,
              " tensors, which do not each split evenly over the ", n, " ranks of `model`");
    splits_.push_back({name, p.shape(), dim, sections});
  }
  for (auto& [path, m] : modules) {
    if (m->type_name() != nn::Linear::kTypeName) continue;
    const auto kind = column.find(m);
    const bool bias_split = m->has_param("bias") && split_of(path + ".bias") != nullptr;
    const bool is_column = kind != column.end() && kind->second;
    if (m->has_param("bias"))
      ACC_CHECK(bias_split == is_column, who_, ": Linear '", path, "': its bias must be split over ",
                "`model` exactly when its weight is column-parallel ([model, ...]): ",
                is_column ? "a column-parallel Linear's output features are split, so is its bias"
                          : "only a column-parallel Linear's output is split");
    if (kind != column.end()) linears_.push_back({m, kind->second});
  }
  check_split_together(model);
  split_layers_ = SplitLayers::plan(model, sharding, [&](const nn::Module* m) { return column.count(m) > 0; }, group_);
  for (auto& l : linears_) l.in_split_layer = split_layers_ && split_layers_->contains(l.module);
  if (n == 1) {  // the specs are valid; with one rank along `model` nothing is split
    splits_.clear();
    linears_.clear();
    embeddings_.clear();
    vocab_parallel_head_ = false;
    head_owner_ = nullptr;
    split_layers_.reset();
  }
}

void TensorParallel::check_split_together(const models::Model& model) const {
  const int n = group_->size();
  auto names = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& name : v) out += (out.empty() ? "" : ", ") + name;
    return out;
  };
  for (const auto& group : model.structure().split_together) {
    std::vector<std::string> split, whole;
    for (const auto& member : group.members) {
      const ModelAxisSplit* s = split_of(member.parameter);
      (s ? split : whole).push_back(member.parameter);
      if (!s) continue;
      ACC_CHECK(s->dim == member.dim, who_, ": ", member.parameter, " is split over `model` on dim ", s->dim,
                "; in '", group.module, "' it is ", member.dim == 0 ? "column" : "row", "-parallel, split on dim ",
                member.dim);
      ACC_CHECK(member.heads == 0 || member.heads % n == 0, who_, ": ", member.parameter, " holds ", member.heads,
                " attention heads, which do not split evenly over the ", n, " ranks of `model`: each rank must ",
                "hold whole heads, the same share of each");
    }
    ACC_CHECK(split.empty() || whole.empty(), who_, ": the rules split ", names(split), " over `model` but not ",
              names(whole), ": the parameters of '", group.module, "' are split together (column-parallel ",
              "inputs, row-parallel output), or a rank would combine its slice with whole tensors and compute ",
              "something else than the model");
  }
}

TensorParallel::~TensorParallel() {
  for (auto& h : hooks_) h.remove();
  if (head_owner_) {
    head_owner_->set_head_loss(nullptr);
    head_owner_->set_head_logits(nullptr);
  }
}

const ModelAxisSplit* TensorParallel::split_of(const std::string& name) const {
  for (const auto& s : splits_)
    if (s.name == name) return &s;
  return nullptr;
}

bool TensorParallel::splits_output(const nn::Module* module) const {
  for (const auto& l : linears_)
    if (l.module == module) return l.column;
  return false;
}

void TensorParallel::slice_parameters(models::Model& model) const {
  for (const auto& s : splits_)
    model.replace_parameter(s.name, take_slice(model.parameter(s.name), s, group_->rank(), group_->size()));
}

void TensorParallel::install() {
  for (const auto& l : linears_) {
    if (l.column)  // the input whole on every rank: gathered where the layer's output is split
      hooks_.push_back(l.module->add_call_wrapper(
          [this, g = group_, split = l.in_split_layer](nn::Module& m, const Tensor& x, const nn::Module::Inner& inner) {
            if (joined()) return inner(x);
            if (!split) return inner(enter_parallel_region(x, g));
            return split_layers_->column_linear(x, m.param("weight"), m.has_param("bias") ? m.param("bias") : Tensor());
          }));
    else  // computes the product itself, so the whole bias is added once, after the sum
      hooks_.push_back(l.module->add_call_wrapper(
          [this, g = group_, split = l.in_split_layer](nn::Module& m, const Tensor& x, const nn::Module::Inner& inner) {
            if (joined()) return inner(x);
            const Tensor partial = ops::linear(x, m.param("weight"));
            const Tensor y = split ? split_layers_->scatter_partial_sums(partial) : reduce_partial_sums(partial, g);
            if (!m.has_param("bias")) return y;
            return ops::add(y, split ? split_layers_->row_bias(m.param("bias")) : m.param("bias"));
          }));
  }
  if (split_layers_) split_layers_->install(hooks_, [this] { return joined(); });
  for (const auto& e : embeddings_) {
    if (e.width) {  // this rank's columns of every id, gathered; the gradient's columns go back
      hooks_.push_back(e.module->add_call_wrapper(
          [this, g = group_, extents = split_sizes(e.extent, group_->size())](
              nn::Module&, const Tensor& ids, const nn::Module::Inner& inner) {
            if (joined()) return inner(ids);
            return gather_slices(inner(ids), -1, extents, g);
          }));
      continue;
    }
    // The vocabulary-parallel lookup: this rank's rows where it holds the id, summed over the
    // group; the output's gradient (the same on every rank) goes into this rank's rows.
    hooks_.push_back(e.module->add_call_wrapper(
        [this, g = group_, vocab = e.extent, first = first_row(e.extent)](nn::Module& m, const Tensor& ids, const nn::Module::Inner& inner) {
          if (joined()) return inner(ids);
          const Tensor weight = m.param("weight");
          return vocab_parallel_embedding({g, weight, first, vocab, weight.requires_grad(), nullptr, /*replicated_rows=*/true}, ids);
        }));
  }
  install_head();
}

void TensorParallel::install_head() {
  if (vocab_parallel_head_)  // this rank's vocabulary columns; the hidden states' gradient summed
    head_owner_->set_head_logits([g = group_](const Tensor& hidden, const Tensor& weight) {
      return ops::linear(enter_parallel_region(hidden, g), weight);
    });
  if (vocab_parallel_head_)
    // The loss on the split logits: each rank's vocabulary rows over the (replicated) tokens,
    // every row's softmax completed across the group; no rank holds [tokens, vocab].
    head_owner_->set_head_loss([g = group_, vocab = head_owner_->vocab_size(), first = first_row(head_owner_->vocab_size())](
                                   const Tensor& hidden, const Tensor& weight, const Tensor& labels) {
      const VocabShard shard{g, weight, first, vocab, weight.requires_grad(), nullptr, /*replicated_rows=*/true};
      return vocab_parallel_loss(shard, hidden, labels, ops::kIgnoreIndex);
    });
}

void TensorParallel::join_parameters(models::Model& model) {
  autograd::NoGradGuard no_grad;
  for (const auto& s : splits_) {
    stashed_.push_back({model.parameter(s.name), slice_held(s)});
    model.replace_parameter(s.name, gather(s, stashed_.back().slice));
  }
  step_aside();
}

void TensorParallel::step_aside() noexcept {
  aside_ = true;
  if (vocab_parallel_head_) {
    head_owner_->set_head_logits({});
    head_owner_->set_head_loss({});
  }
}

void TensorParallel::step_in() noexcept {
  aside_ = false;
  install_head();
}

void TensorParallel::restore_slices(models::Model& model, bool writeback) noexcept {
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < stashed_.size(); ++i) {
    const std::string& name = splits_[i].name;
    const Tensor whole = model.parameter(name);
    if (writeback && whole.shape() == splits_[i].full_shape && whole.dtype() == stashed_[i].slice.dtype())
      copy_held(whole, stashed_[i].held, stashed_[i].slice);
    else if (writeback)  // replaced inside the scope by another shape or dtype: nothing to copy from
      log::warn("summon_full_params: {} was replaced inside the scope by {}, of another shape or dtype; "
                "its slice is not written back", name, whole.describe());
    model.replace_parameter(name, stashed_[i].slice);
  }
  stashed_.clear();
  step_in();
}

int64_t TensorParallel::first_row(int64_t extent) const { return first_of(extent, group_->rank(), group_->size()); }

Tensor TensorParallel::gather(const ModelAxisSplit& split, const Tensor& slice) const {
  autograd::NoGradGuard no_grad;
  auto extents = split_sizes(split.full_shape[split.dim] / split.sections, group_->size());
  for (int64_t& e : extents) e *= split.sections;  // each rank holds its rows of every section
  return join_slices(all_gather_slices(slice, static_cast<size_t>(split.dim), extents, *group_), split);
}

Tensor TensorParallel::gather_vocabulary(const Tensor& logits) const {
  return gather_slices(logits, -1, split_sizes(head_owner_->vocab_size(), group_->size()), group_);
}

ShardedModel::DimSlice TensorParallel::slice_held(const ModelAxisSplit& split) const {
  return held_slice(split, group_->rank(), group_->size());
}

ShardedModel::DimSlice held_slice(const ModelAxisSplit& split, int rank, int size) {
  const int64_t section = split.full_shape[static_cast<size_t>(split.dim)] / split.sections;
  const int64_t first = first_of(section, rank, size), rows = split_sizes(section, size)[static_cast<size_t>(rank)];
  ShardedModel::DimSlice slice{split.dim, {}};
  for (int64_t s = 0; s < split.sections; ++s) slice.blocks.emplace_back(s * section + first, s * section + first + rows);
  return slice;
}

Tensor take_slice(const Tensor& full, const ModelAxisSplit& split, int rank, int size) {
  const ShardedModel::DimSlice held = held_slice(split, rank, size);
  Shape shape = full.shape();
  shape[static_cast<size_t>(split.dim)] = 0;
  for (const auto& [begin, end] : held.blocks) shape[static_cast<size_t>(split.dim)] += end - begin;
  Tensor slice = Tensor::empty(shape, full.dtype());  // in the caller's memory category
  copy_held(full, held, slice);
  return slice;
}

Tensor join_slices(const std::vector<Tensor>& slices, const ModelAxisSplit& split) {
  autograd::NoGradGuard no_grad;
  std::vector<std::vector<Tensor>> sections;  // [rank][section]
  for (const auto& slice : slices) {
    const int64_t each = slice.size(split.dim) / split.sections;
    sections.push_back(ops::split(slice, std::vector<int64_t>(static_cast<size_t>(split.sections), each), split.dim));
  }
  std::vector<Tensor> ordered;
  for (int s = 0; s < split.sections; ++s)
    for (auto& rank : sections) ordered.push_back(rank[static_cast<size_t>(s)]);
  return ops::concat(ordered, split.dim);
}

}  // namespace acc::parallel
