#include "flat_unit.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "acc/autograd/grad_math.h"
#include "acc/autograd/grad_mode.h"
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

}  // namespace

FlatUnit::FlatUnit(std::string name, nn::Module& root,
                   const std::vector<std::pair<std::string, Tensor>>& params, UnitGroups groups,
                   DType compute_dtype, bool reduce_bf16, memory::Tier state_tier, int64_t row_numel)
    : name_(std::move(name)), groups_(std::move(groups)), compute_dtype_(compute_dtype),
      reduce_bf16_(reduce_bf16), state_tier_(state_tier) {
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
  const int64_t per_rank = (numel + ranks - 1) / ranks;
  const int64_t align = row_numel > 0 ? std::lcm(kShardAlign, row_numel) : kShardAlign;
  shard_ = std::max<int64_t>(align, (per_rank + align - 1) / align * align);

  autograd::NoGradGuard no_grad;
  master_ = new_buffer(shard_, DType::f32, memory::Category::parameters, state_tier_);
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
  compute_ = compute_dtype_ == DType::f32
                 ? master_
                 : new_buffer(shard_, compute_dtype_, memory::Category::parameters, shard_tier());
  if (compute_dtype_ != DType::f32) compute_.copy_(master_);
  full_ = compute_;
  if (sharded()) {
    memory::CategoryScope scope(memory::Category::parameters);
    full_ = Tensor::unallocated({shard_ * ranks}, compute_dtype_);  // gather() fills it
  }
  for (auto& slot : slots_) {
    root.set_parameter(slot.name, full_.slice_flat(slot.offset, slot.shape));
    slot.view = root.parameter(slot.name);
    trainable_ += slot.view.requires_grad();
  }
  page_out(master_);
}

memory::Tier FlatUnit::shard_tier() const {
  // Files hold what the optimizer alone reads; what every step's communication touches (the
  // reduced gradient, the bf16 shard the all-gather sends) stays in host memory.
  return state_tier_ == memory::Tier::file ? memory::Tier::offload : state_tier_;
}

int64_t FlatUnit::shard_begin() const { return groups_.shard->rank() * shard_; }

FlatUnit::Part FlatUnit::part_of(const Slot& slot, int rank) const {
  const int64_t lo = std::max(slot.offset, rank * shard_);
  const int64_t hi = std::min(slot.offset + shape_numel(slot.shape), (rank + 1) * shard_);
  return lo < hi ? Part{lo, hi - lo} : Part{};
}

FlatUnit::Params FlatUnit::params() const {
  if (gathering_) return Params::gathering;
  return full_.storage()->released() ? Params::sharded : Params::gathered;
}

void FlatUnit::start_gather() {
  if (!sharded() || gathered()) return;
  full_.storage()->reacquire();
  activity::Unit unit(name_);
  gathering_ = groups_.shard->all_gather_async(compute_, full_);
}

void FlatUnit::gather() {
  start_gather();
  wait_for_gather();
}

void FlatUnit::wait_for_gather() {
  if (!gathering_) return;
  // Forget the work first: if it failed, wait() throws, and a later call re-raises nothing
  // stale.
  auto work = std::move(gathering_);
  work->wait();
  page_out(compute_);  // in a file (offload_dir, f32): sent, so not needed resident until the step
}

void FlatUnit::write_back() {
  // f32 compute only (the caller checks): then `compute` is `master`, and unsharded, `full` too.
  if (sharded() && gathered()) {
    gather();
    master_.copy_(full_.slice_flat(shard_begin(), {shard_}));
    page_out(master_);
  }
}

void FlatUnit::release() {
  if (!sharded()) return;
  wait_for_gather();  // a gather in flight is writing the bytes
  full_.storage()->release();
}

void FlatUnit::begin_pass(bool accumulate, bool sync) {
  if (pass_ != Pass::idle) return;
  pass_ = sync ? Pass::reducing : Pass::summing;
  accumulate_ = accumulate;
  arrived_ = 0;
  local_parts_ = 0;
  if (!sync) return;
  if (!grad_.defined())
    grad_ = new_buffer(grad_numel(), DType::f32, memory::Category::gradients, shard_tier());
  if (!accumulate_) grad_.zero_();  // parameters that get no gradient this pass count as zero
}

std::optional<FlatUnit::Reduction> FlatUnit::take_gradient(size_t i, const Tensor& grad) {
  ACC_CHECK(pass_ != Pass::idle, "FSDP unit '", name_, "': a gradient arrived outside a backward pass");
  autograd::NoGradGuard no_grad;
  const Slot& slot = slots_[i];
  const int64_t numel = shape_numel(slot.shape);
  Tensor flat = grad.view({numel});
  const bool sync = pass_ == Pass::reducing;
  if (!sync && !local_.defined())
    local_ = new_buffer(trainable_numel_, DType::f32, memory::Category::gradients);
  if (local_.defined()) {  // no_sync passes summed gradients here: add this one
    Tensor summed = local_.slice_flat(slot.offset, {numel});
    autograd::add_into(summed, flat);
    if (!sync) return std::nullopt;
    flat = summed;
  }
  // The ranks' parts of the slot, in rank order, tile it: the counts of a reduce_scatter_v.
  std::vector<int64_t> counts(static_cast<size_t>(groups_.shard->size()));
  for (size_t k = 0; k < counts.size(); ++k) counts[k] = part_of(slot, static_cast<int>(k)).count;
  const Part mine = local_part(slot);
  Reduction r;
  r.held_ = flat;
  r.target_ = grad_.slice_flat(mine.count ? mine.first - shard_begin() : 0, {mine.count});
  // Straight into the shard's gradient unless it must be added to what the optimizer kept.
  r.reduced_ = accumulate_ ? new_buffer(mine.count, DType::f32, memory::Category::gradients) : r.target_;
  // Named by parameter: a parameter with a gradient on some ranks only is then named by the
  // collective order check (its reduction meets another parameter's on the other ranks).
  activity::Unit parameter(slot.name, "parameter");
  return issue(std::move(r), flat, sharded() ? counts : std::vector<int64_t>{});
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
  if (reduce_bf16_ && (scatter || replicated))
    r.wire_ = new_buffer(r.reduced_.numel(), DType::bf16, memory::Category::communication);
  Tensor out = r.wire_.defined() ? r.wire_ : r.reduced_;
  if (scatter)
    r.works_.push_back(groups_.shard->reduce_scatter_v_async(
        r.wire_.defined() ? flat.to(DType::bf16) : flat, out, scatter_counts, dist::ReduceOp::avg));
  else if (!out.is_same(flat))
    out.copy_(flat);
  // Collectives run in issue order (process_group.h): this one reads the finished reduce-scatter.
  if (replicated) r.works_.push_back(groups_.replicate->all_reduce_async(out, dist::ReduceOp::avg));
  if (r.works_.empty()) {  // one rank: nothing to wait for
    r.land();
    return std::nullopt;
  }
  return r;
}

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
  pass_ = Pass::idle;
}

}  // namespace acc::fsdp
