#include "flat_unit.h"

#include <algorithm>

#include "acc/autograd/grad_mode.h"
#include "acc/autograd/grad_math.h"

namespace acc::fsdp {

namespace {

// Shards are whole multiples of 16 elements: 64-byte aligned for f32, so every rank's chunk of
// a collective and every kernel over a shard starts on a cache line.
constexpr int64_t kShardAlign = 16;

Tensor new_buffer(int64_t numel, DType dtype, memory::Category category) {
  memory::CategoryScope scope(category);
  return Tensor::zeros({numel}, dtype);
}

}  // namespace

FlatUnit::FlatUnit(std::string name, nn::Module& root,
                   const std::vector<std::pair<std::string, Tensor>>& params, UnitGroups groups,
                   DType compute_dtype)
    : name_(std::move(name)), groups_(std::move(groups)), compute_dtype_(compute_dtype) {
  for (const auto& [pname, p] : params) {
    ACC_CHECK(p.dtype() == DType::f32, "FSDP unit '", name_, "': parameter '", pname, "' is ",
              p.describe(), "; acc shards f32 parameters (mixed precision comes from the config)");
    slots_.push_back(Slot{pname, p.shape(), numel_, Tensor()});
    numel_ += p.numel();
  }
  const int64_t ranks = groups_.shard->size();
  const int64_t per_rank = (numel_ + ranks - 1) / ranks;
  shard_ = std::max<int64_t>(kShardAlign, (per_rank + kShardAlign - 1) / kShardAlign * kShardAlign);

  autograd::NoGradGuard no_grad;
  master_ = new_buffer(shard_, DType::f32, memory::Category::parameters);
  const int64_t begin = shard_begin();
  float* dst = master_.data<float>();
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Tensor& p = params[i].second;
    const int64_t lo = std::max(slots_[i].offset, begin);
    const int64_t hi = std::min(slots_[i].offset + p.numel(), begin + shard_);
    if (lo < hi)
      std::copy_n(p.data<float>() + (lo - slots_[i].offset), hi - lo, dst + (lo - begin));
  }
  compute_ = compute_dtype_ == DType::f32 ? master_
                                          : new_buffer(shard_, compute_dtype_, memory::Category::parameters);
  if (compute_dtype_ != DType::f32) compute_.copy_(master_);
  full_ = compute_;
  if (sharded()) {
    full_ = new_buffer(shard_ * ranks, compute_dtype_, memory::Category::parameters);
    full_.storage()->release();  // gather() fills it from every rank's shard
  }
  gather();
  for (auto& slot : slots_) {
    root.set_parameter(slot.name, full_.slice_flat(slot.offset, slot.shape));
    slot.view = root.parameter(slot.name);
  }
}

int64_t FlatUnit::shard_begin() const { return groups_.shard->rank() * shard_; }

void FlatUnit::gather() {
  if (!sharded() || gathered()) return;
  full_.storage()->reacquire();
  groups_.shard->all_gather(compute_, full_);
}

void FlatUnit::release() {
  if (sharded()) full_.storage()->release();
}

void FlatUnit::begin_gradients(bool accumulate) {
  if (collecting_gradients()) return;
  accumulate_ = accumulate;
  if (!sharded() && !accumulate) {  // the gradients are the shard's own: land them there
    if (!grad_.defined()) grad_ = new_buffer(shard_, DType::f32, memory::Category::gradients);
    grad_.zero_();
    full_grad_ = grad_;
  } else {
    full_grad_ = new_buffer(full_.numel(), DType::f32, memory::Category::gradients);
  }
  arrived_ = 0;
  for (auto& slot : slots_)
    if (slot.view.requires_grad()) slot.view.set_grad(full_grad_.slice_flat(slot.offset, slot.shape));
}

bool FlatUnit::gradient_arrived() {
  const auto trainable = std::count_if(slots_.begin(), slots_.end(),
                                       [](const Slot& s) { return s.view.requires_grad(); });
  return ++arrived_ == static_cast<size_t>(trainable);
}

void FlatUnit::reduce_gradients() {
  ACC_CHECK(collecting_gradients(), "FSDP unit '", name_, "': no gradients to reduce");
  autograd::NoGradGuard no_grad;
  if (!grad_.defined()) grad_ = new_buffer(shard_, DType::f32, memory::Category::gradients);
  Tensor reduced = full_grad_;
  if (sharded()) {
    // Straight into the shard's gradient unless it must be added to what is there.
    reduced = accumulate_ ? new_buffer(shard_, DType::f32, memory::Category::gradients) : grad_;
    groups_.shard->reduce_scatter(full_grad_, reduced, dist::ReduceOp::avg);
  }
  if (groups_.replicate->size() > 1) groups_.replicate->all_reduce(reduced, dist::ReduceOp::avg);
  if (!reduced.is_same(grad_)) {  // else the gradients were reduced in place
    if (accumulate_)
      autograd::add_into(grad_, reduced);
    else
      grad_.copy_(reduced);
  }
  drop_gradients();
}

void FlatUnit::drop_gradients() {
  for (auto& slot : slots_) slot.view.set_grad(Tensor());
  full_grad_ = Tensor();
}

}  // namespace acc::fsdp
