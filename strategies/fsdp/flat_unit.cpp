#include "flat_unit.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "acc/autograd/grad_math.h"
#include "acc/autograd/grad_mode.h"
#include "acc/kernels/quantize.h"
#include "acc/nn/deferred_init.h"
#include "acc/util/activity.h"

namespace acc::fsdp {

namespace {

// Shards are whole multiples of 16 elements: 64-byte aligned for f32, so every rank's chunk of
// a collective and every kernel over a shard starts on a cache line.
constexpr int64_t kShardAlign = 16;

Tensor new_buffer(int64_t numel, DType dtype, memory::Category category,
                  memory::Tier tier = memory::Tier::compute) {
  memory::CategoryScope scope(category);
  memory::TierScope in(tier);
  return Tensor::zeros({numel}, dtype);
}

// A bucket's gradient, assembled when it is reduced: every element is written before it is
// read, so left unset. Counted with the activations, as the gradients autograd makes (which it
// replaces) are: the shard's gradient, the `gradients` category, never grows during a step.
Tensor bucket_buffer(int64_t numel) {
  memory::CategoryScope scope(memory::Category::activations);
  return Tensor::empty({numel});
}

}  // namespace

FlatUnit::FlatUnit(std::string name, nn::Module& root,
                   const std::vector<std::pair<std::string, Tensor>>& params, UnitGroups groups,
                   Options options)
    : name_(std::move(name)), groups_(std::move(groups)), options_(options) {
  // Quantize only what crosses nodes: inside one, bytes cost a memcpy, and quantizing more.
  if (groups_.shard->span() != dist::Span::cross_node) options_.quantize_block = 0;
  // Trainable parameters first, frozen ones after: gradients then only need the flat prefix
  // [0, trainable_numel_), and a frozen parameter costs no gradient memory on any rank.
  std::vector<size_t> order(params.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(),
                        [&params](size_t i) { return params[i].second.requires_grad(); });
  int64_t numel = 0;  // of all the parameters, before padding
  for (size_t i : order) {
    const auto& [pname, p] = params[i];
    ACC_CHECK(p.dtype() == DType::f32, "FSDP unit '", name_, "': parameter '", pname, "' is ",
              p.describe(), "; acc shards f32 parameters (mixed precision comes from the config)");
    slots_.push_back(Slot{pname, p.shape(), numel, Tensor()});
    numel += p.numel();
    if (p.requires_grad()) trainable_numel_ = numel;
  }
  const int64_t ranks = groups_.shard->size();
  if (groups_.across)
    ACC_CHECK(groups_.node && groups_.shard->rank() == groups_.across->rank() * groups_.node->size() + groups_.node->rank(),
              "FSDP unit '", name_, "': shard-group rank ", groups_.shard->rank(), " is not rank ",
              groups_.node ? groups_.node->rank() : -1, " of node ", groups_.across->rank());
  const int64_t per_rank = (numel + ranks - 1) / ranks;
  const int64_t align = options_.row_numel > 0 ? std::lcm(kShardAlign, options_.row_numel) : kShardAlign;
  shard_ = std::max<int64_t>(align, (per_rank + align - 1) / align * align);

  autograd::NoGradGuard no_grad;
  master_ = new_buffer(shard_, DType::f32, memory::Category::parameters, options_.state_tier);
  float* dst = master_.data<float>();
  for (size_t k = 0; k < slots_.size(); ++k) {
    const Part part = local_part(slots_[k]);
    if (!part.count) continue;
    const Tensor& p = params[order[k]].second;
    const int64_t first = part.first - slots_[k].offset;  // in the parameter
    float* to = dst + (part.first - shard_begin());
    if (nn::is_deferred(p))  // made here, this rank's elements only
      nn::fill_part(p, first, part.count, to);
    else
      std::copy_n(p.data<float>() + first, part.count, to);
  }
  const DType compute_dtype = options_.compute_dtype;
  compute_ = compute_dtype == DType::f32
                 ? master_
                 : new_buffer(shard_, compute_dtype, memory::Category::parameters, shard_tier());
  if (compute_dtype != DType::f32) compute_.copy_(master_);
  full_ = compute_;
  if (sharded()) {
    memory::CategoryScope scope(memory::Category::parameters);
    full_ = Tensor::unallocated({shard_ * ranks}, compute_dtype);  // gather() fills it
  }
  for (auto& slot : slots_) {
    root.set_parameter(slot.name, full_.slice_flat(slot.offset, slot.shape));
    slot.view = root.parameter(slot.name);
    trainable_ += slot.view.requires_grad();
  }
  page_out(master_);
  const int64_t bucket = options_.bucket_numel > 0 ? options_.bucket_numel : std::max<int64_t>(trainable_numel_, 1);
  for (int64_t begin = 0; begin < trainable_numel_; begin += bucket)
    buckets_.push_back(Bucket{.begin = begin, .end = std::min(begin + bucket, trainable_numel_)});
  for (const auto& slot : slots_) {
    if (!slot.view.requires_grad() || shape_numel(slot.shape) == 0) continue;
    const auto [first, last] = buckets_of(slot);
    for (size_t k = first; k <= last; ++k) ++buckets_[k].needed;
  }
  slot_arrived_.assign(slots_.size(), false);
  slot_grads_.assign(slots_.size(), Tensor());
}

std::pair<size_t, size_t> FlatUnit::buckets_of(const Slot& slot) const {
  const int64_t bucket = buckets_.front().end - buckets_.front().begin;
  return {static_cast<size_t>(slot.offset / bucket),
          static_cast<size_t>((slot.offset + shape_numel(slot.shape) - 1) / bucket)};
}

memory::Tier FlatUnit::shard_tier() const {
  // The bf16 shard every gather sends stays in host memory; files hold only what the optimizer
  // reads (master, gradient, state). The gradient is written once by the reductions and read
  // once by the optimizer, and zero_() at the next backward drops its pages unwritten.
  const memory::Tier state = options_.state_tier;
  return state == memory::Tier::file ? memory::Tier::offload : state;
}

int64_t FlatUnit::shard_begin() const { return groups_.shard->rank() * shard_; }

FlatUnit::Part FlatUnit::overlap(int64_t begin, int64_t end, int64_t other_begin, int64_t other_end) {
  const int64_t lo = std::max(begin, other_begin), hi = std::min(end, other_end);
  return lo < hi ? Part{lo, hi - lo} : Part{};
}

FlatUnit::Part FlatUnit::part_of(const Slot& slot, int rank) const {
  return overlap(slot.offset, slot.offset + shape_numel(slot.shape), rank * shard_, (rank + 1) * shard_);
}

FlatUnit::Params FlatUnit::params() const {
  if (gathering_) return Params::gathering;
  return full_.storage()->released() ? Params::sharded : Params::gathered;
}

void FlatUnit::start_gather(Precision precision) {
  if (!sharded() || gathered()) return;
  full_.storage()->reacquire();
  activity::Unit unit(name_);
  if (node_copy_.defined()) {  // the values of this forward, from the node's ranks only
    node_copy_sending_ = std::exchange(node_copy_, Tensor());
    gathering_ = groups_.node->all_gather_async(node_copy_sending_, full_, dist::Lane::urgent);
    return;
  }
  const int64_t block = options_.quantize_block;
  if (block == 0 || precision == Precision::exact) {
    gathering_ = groups_.shard->all_gather_async(compute_, full_, dist::Lane::urgent);
    return;
  }
  // From the f32 master, whatever the compute dtype: one rounding, not two.
  memory::CategoryScope scope(memory::Category::communication);
  quantized_mine_ = Tensor::empty({quantized_words()}, DType::i32);
  quantized_all_ = Tensor::empty({quantized_words() * groups_.shard->size()}, DType::i32);
  auto* q = reinterpret_cast<int8_t*>(quantized_mine_.data<int32_t>());
  auto* scales = reinterpret_cast<float*>(q + shard_);
  for (const Part& part : parts_of_rank(groups_.shard->rank())) {
    const int64_t at = part.first - shard_begin();
    kernels::quantize_int8(master_.data<float>() + at, part.count, block, q + at, scales);
    scales += kernels::quant_blocks(part.count, block);
  }
  page_out(master_);
  gathering_ = groups_.shard->all_gather_async(quantized_mine_, quantized_all_, dist::Lane::urgent);
}

int64_t FlatUnit::quantized_words() const {
  // shard_ is a multiple of 16, so the int8 values fill whole words and the scales align. Each
  // part has at most one partial block: at most shard_ / block + slots scales.
  return shard_ / 4 + shard_ / options_.quantize_block + static_cast<int64_t>(slots_.size());
}

std::vector<FlatUnit::Part> FlatUnit::parts_of_rank(int rank) const {
  std::vector<Part> parts;
  for (const auto& slot : slots_)
    if (const Part part = part_of(slot, rank); part.count) parts.push_back(part);
  return parts;
}

void FlatUnit::dequantize_gathered(const Tensor& messages) {
  const int64_t block = options_.quantize_block, words = quantized_words();
  const auto* all = messages.data<int32_t>();
  for (int r = 0; r < groups_.shard->size(); ++r) {
    const auto* q = reinterpret_cast<const int8_t*>(all + r * words);
    const auto* scales = reinterpret_cast<const float*>(q + shard_);
    for (const Part& part : parts_of_rank(r)) {
      const int64_t at = part.first - r * shard_;  // in rank r's shard
      if (full_.dtype() == DType::bf16)
        kernels::dequantize_int8(q + at, scales, part.count, block, full_.data<bfloat16>() + part.first);
      else
        kernels::dequantize_int8(q + at, scales, part.count, block, full_.data<float>() + part.first);
      scales += kernels::quant_blocks(part.count, block);
    }
  }
}

void FlatUnit::gather(Precision precision) {
  start_gather(precision);
  wait_for_gather();
}

void FlatUnit::wait_for_gather() {
  if (!gathering_) return;
  // Forget the work and the messages first: if it failed, wait() throws, and a later call
  // re-raises nothing stale.
  auto work = std::move(gathering_);
  const Tensor mine = std::exchange(quantized_mine_, Tensor()), all = std::exchange(quantized_all_, Tensor());
  const Tensor node_copy = std::exchange(node_copy_sending_, Tensor());
  work->wait();
  if (all.defined()) dequantize_gathered(all);
  page_out(compute_);  // in a file (offload_dir, f32): sent, so not needed resident until the step
}

void FlatUnit::write_back() {
  // f32 compute only (the caller checks): then `compute` is `master`, and unsharded, `full` too.
  if (sharded() && gathered()) {
    gather(Precision::exact);
    master_.copy_(full_.slice_flat(shard_begin(), {shard_}));
    page_out(master_);
  }
}

void FlatUnit::release() {
  forget_node_copy();
  if (!sharded()) return;
  wait_for_gather();  // a gather in flight is writing the bytes
  full_.storage()->release();
}

void FlatUnit::reshard_after_forward() {
  Tensor kept;
  if (options_.node_copies && groups_.node && sharded() && gathered()) {
    wait_for_gather();
    const int64_t part = full_.numel() / groups_.node->size();
    memory::CategoryScope scope(memory::Category::parameters);
    kept = full_.slice_flat(groups_.node->rank() * part, {part}).clone();
  }
  release();
  node_copy_ = std::move(kept);
}

void FlatUnit::begin_pass(bool accumulate, bool sync) {
  if (pass_ != Pass::idle) return;
  pass_ = sync ? Pass::reducing : Pass::summing;
  accumulate_ = accumulate;
  arrived_ = 0;
  local_parts_ = 0;
  std::fill(slot_arrived_.begin(), slot_arrived_.end(), false);
  for (auto& g : slot_grads_) g = Tensor();
  for (auto& b : buckets_) {
    b.arrived = 0;
    b.reduced = false;
  }
  if (!sync) return;
  if (!grad_.defined())
    grad_ = new_buffer(grad_numel(), DType::f32, memory::Category::gradients, options_.state_tier);
  if (!accumulate_) grad_.zero_();  // parameters that get no gradient this pass count as zero
}

std::vector<FlatUnit::Reduction> FlatUnit::take_gradient(size_t i, const Tensor& grad) {
  ACC_CHECK(pass_ != Pass::idle, "FSDP unit '", name_, "': a gradient arrived outside a backward pass");
  autograd::NoGradGuard no_grad;
  const Slot& slot = slots_[i];
  const int64_t numel = shape_numel(slot.shape);
  Tensor flat = grad.view({numel});
  if (pass_ == Pass::summing && !local_.defined())
    local_ = new_buffer(trainable_numel_, DType::f32, memory::Category::gradients);
  if (local_.defined()) {  // no_sync passes sum here; a syncing pass then reduces the sums
    autograd::add_into(local_.slice_flat(slot.offset, {numel}), flat);
    if (pass_ == Pass::summing) return {};
    flat = local_.slice_flat(slot.offset, {numel});
  }
  slot_arrived_[i] = true;
  std::vector<Reduction> reductions;
  if (numel == 0) return reductions;
  if (!communicates()) {  // one rank: the gradient is the shard's, no bucket
    Tensor target = grad_.slice_flat(slot.offset, {numel});
    if (accumulate_)
      autograd::add_into(target, flat);
    else
      target.copy_(flat);
    return reductions;
  }
  slot_grads_[i] = flat;  // kept (not copied) until its buckets are reduced
  const auto [first, last] = buckets_of(slot);
  for (size_t k = first; k <= last; ++k)
    if (++buckets_[k].arrived == buckets_[k].needed)
      if (auto r = reduce_bucket(k)) reductions.push_back(std::move(*r));
  return reductions;
}

std::vector<FlatUnit::Reduction> FlatUnit::reduce_open_buckets() {
  std::vector<Reduction> reductions;
  if (pass_ != Pass::reducing) return reductions;
  autograd::NoGradGuard no_grad;
  if (!communicates()) {  // the shard's gradient took what arrived; a no_sync sum joins it
    if (local_.defined())
      for (size_t i = 0; i < slots_.size(); ++i)
        if (slots_[i].view.requires_grad() && !slot_arrived_[i]) {
          const int64_t numel = shape_numel(slots_[i].shape);
          autograd::add_into(grad_.slice_flat(slots_[i].offset, {numel}), local_.slice_flat(slots_[i].offset, {numel}));
        }
    return reductions;
  }
  // Untouched buckets send nothing, unless no_sync passes summed gradients for them.
  for (size_t k = 0; k < buckets_.size(); ++k)
    if (!buckets_[k].reduced && (buckets_[k].arrived > 0 || local_.defined()))
      if (auto r = reduce_bucket(k)) reductions.push_back(std::move(*r));
  return reductions;
}

std::optional<FlatUnit::Reduction> FlatUnit::reduce_bucket(size_t k) {
  Bucket& b = buckets_[k];
  b.reduced = true;
  Tensor held;
  if (local_.defined()) {  // the sums are in place already
    held = local_.slice_flat(b.begin, {b.end - b.begin});
  } else {  // the arrived gradients' overlaps, and zeros for those that did not arrive
    held = bucket_buffer(b.end - b.begin);
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& slot = slots_[i];
      const Part in = overlap(b.begin, b.end, slot.offset, slot.offset + shape_numel(slot.shape));
      if (!in.count || !slot.view.requires_grad()) continue;
      Tensor part = held.slice_flat(in.first - b.begin, {in.count});
      if (slot_grads_[i].defined())
        part.copy_(slot_grads_[i].slice_flat(in.first - slot.offset, {in.count}));
      else
        part.zero_();
      const auto [first, last] = buckets_of(slot);
      bool spent = true;  // every bucket the slot overlaps has its part now
      for (size_t j = first; j <= last; ++j) spent = spent && buckets_[j].reduced;
      if (spent) slot_grads_[i] = Tensor();
    }
  }
  // The ranks' parts of the bucket, in rank order, tile it: the counts of a reduce_scatter_v.
  std::vector<int64_t> counts(static_cast<size_t>(groups_.shard->size()));
  for (size_t r = 0; r < counts.size(); ++r)
    counts[r] = overlap(b.begin, b.end, static_cast<int64_t>(r) * shard_, static_cast<int64_t>(r + 1) * shard_).count;
  const Part mine = overlap(b.begin, b.end, shard_begin(), shard_begin() + shard_);
  Reduction r;
  r.held_ = held;
  r.target_ = grad_.slice_flat(mine.count ? mine.first - shard_begin() : 0, {mine.count});
  // Straight into the shard's gradient unless it must be added to what the optimizer kept.
  r.reduced_ = accumulate_ ? new_buffer(mine.count, DType::f32, memory::Category::gradients) : r.target_;
  activity::Unit unit(name_);
  return issue(std::move(r), held, sharded() ? counts : std::vector<int64_t>{});
}

std::optional<FlatUnit::Reduction> FlatUnit::take_local_gradient(const Tensor& part) {
  ACC_CHECK(pass_ != Pass::idle, "FSDP unit '", name_, "': a gradient arrived outside a backward pass");
  autograd::NoGradGuard no_grad;
  Tensor flat = part.view({part.numel()});
  ACC_CHECK(flat.numel() == grad_numel(), "FSDP unit '", name_, "': a gradient of ", flat.numel(),
            " elements for this rank's part of ", grad_numel());
  if (pass_ == Pass::summing) {
    if (!local_part_.defined()) local_part_ = new_buffer(flat.numel(), DType::f32, memory::Category::gradients);
    autograd::add_into(local_part_, flat);
    return std::nullopt;
  }
  if (local_part_.defined()) {  // what no_sync passes summed joins this pass's first part
    autograd::add_into(local_part_, flat);
    flat = std::exchange(local_part_, Tensor());
  }
  Reduction r;
  r.held_ = flat;
  r.target_ = grad_;
  // The pass's first part replaces the shard's gradient, unless the optimizer kept one; else
  // the part is reduced in place and then added (no gradient-sized buffer of its own).
  r.reduced_ = accumulate_ || local_parts_++ > 0 ? flat : grad_;
  activity::Unit unit(name_);
  return issue(std::move(r), flat, {});
}

std::optional<FlatUnit::Reduction> FlatUnit::issue(Reduction r, const Tensor& flat,
                                                   const std::vector<int64_t>& scatter_counts) {
  // With bf16 on the wire both collectives run on one bf16 buffer (the f32 result of a bf16
  // reduce-scatter is exact in bf16, so the all-reduce sees the same values either way).
  const bool scatter = !scatter_counts.empty();
  const bool replicated = groups_.replicate->size() > 1;
  if (options_.reduce_bf16 && (scatter || replicated))
    r.wire_ = new_buffer(r.reduced_.numel(), DType::bf16, memory::Category::communication);
  Tensor out = r.wire_.defined() ? r.wire_ : r.reduced_;
  if (scatter && groups_.across && options_.gradient_wire.quantized())
    reduce_scatter_over_nodes(r, flat, out, scatter_counts);
  else if (scatter)
    r.works_.push_back(groups_.shard->reduce_scatter_v_async(r.wire_.defined() ? flat.to(DType::bf16) : flat, out,
                                                             scatter_counts, dist::ReduceOp::avg,
                                                             wire_over(*groups_.shard)));
  else if (!out.is_same(flat))
    out.copy_(flat);
  // Collectives run in issue order (process_group.h): this one reads the finished reduce-scatter.
  if (replicated)
    r.works_.push_back(groups_.replicate->all_reduce_async(out, dist::ReduceOp::avg, wire_over(*groups_.replicate)));
  if (r.works_.empty()) {  // one rank: nothing to wait for
    r.land();
    return std::nullopt;
  }
  return r;
}

// ZeRO++'s hierarchical qgZ. First inside the node, in f32: local rank l receives the sum over
// the node of the parts of shard-group ranks n * L + l for every node n, so the bucket is laid
// out by place (l) before node (n). Then across nodes over the int8 wire among the ranks at
// place l: each keeps its own part. Only 1/L of the bucket crosses nodes, as int8.
void FlatUnit::reduce_scatter_over_nodes(Reduction& r, const Tensor& flat, const Tensor& out,
                                         const std::vector<int64_t>& counts) {
  const int places = groups_.node->size(), nodes = groups_.across->size();
  std::vector<int64_t> offsets(counts.size() + 1, 0);
  for (size_t g = 0; g < counts.size(); ++g) offsets[g + 1] = offsets[g] + counts[g];
  Tensor by_place = bucket_buffer(flat.numel());
  std::vector<int64_t> place_counts(static_cast<size_t>(places), 0);
  int64_t at = 0;
  for (int l = 0; l < places; ++l)
    for (int n = 0; n < nodes; ++n) {
      const size_t g = static_cast<size_t>(n * places + l);
      by_place.slice_flat(at, {counts[g]}).copy_(flat.slice_flat(offsets[g], {counts[g]}));
      at += counts[g];
      place_counts[l] += counts[g];
    }
  const int mine = groups_.node->rank();
  std::vector<int64_t> node_counts(static_cast<size_t>(nodes));
  for (int n = 0; n < nodes; ++n) node_counts[n] = counts[static_cast<size_t>(n * places + mine)];
  Tensor node_sum = bucket_buffer(place_counts[mine]);
  r.works_.push_back(groups_.node->reduce_scatter_v_async(by_place, node_sum, place_counts, dist::ReduceOp::avg));
  r.works_.push_back(groups_.across->reduce_scatter_v_async(node_sum, out, node_counts, dist::ReduceOp::avg,
                                                            options_.gradient_wire));
}

dist::ReduceWire FlatUnit::wire_over(const dist::ProcessGroup& group) const {
  if (group.span() != dist::Span::cross_node) return {};
  return options_.gradient_wire;
}

bool FlatUnit::communicates() const { return sharded() || groups_.replicate->size() > 1; }

int64_t FlatUnit::grad_numel() const {
  // None when this rank's shard holds frozen parameters (or padding) only.
  return std::clamp<int64_t>(trainable_numel_ - shard_begin(), 0, shard_);
}

void FlatUnit::Reduction::land() {
  autograd::NoGradGuard no_grad;
  for (auto& work : works_) work->wait();
  if (wire_.defined()) reduced_.copy_(wire_);
  if (!reduced_.is_same(target_)) autograd::add_into(target_, reduced_);
  *this = Reduction();  // lets go of the gradient and the buffers
}

bool FlatUnit::slot_done() { return ++arrived_ == trainable_; }

void FlatUnit::end_pass() {
  if (pass_ == Pass::reducing) local_ = Tensor();  // reduced: the local sum is spent
  for (auto& g : slot_grads_) g = Tensor();  // an interrupted backward's: never sent
  pass_ = Pass::idle;
}

}  // namespace acc::fsdp
