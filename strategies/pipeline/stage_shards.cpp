#include "stage_shards.h"

#include <algorithm>
#include <cstring>

#include "acc/autograd/grad_mode.h"
#include "acc/memory/allocator.h"
#include "acc/util/error.h"

namespace acc::pipeline {

StageShards::StageShards(std::vector<Tensor> whole, const std::vector<Tensor>& values,
                         std::shared_ptr<dist::ProcessGroup> group)
    : whole_(std::move(whole)), group_(std::move(group)) {
  const int64_t f = group_->size();
  for (const Tensor& t : whole_) {
    per_rank_.push_back((t.numel() + f - 1) / f);
    offset_.push_back(block_);
    block_ += per_rank_.back();
  }
  memory::CategoryScope category(memory::Category::parameters);
  shard_ = Tensor::zeros({block_});
  float* shard = shard_.data<float>();
  for (size_t i = 0; i < whole_.size(); ++i) {
    const int64_t n = count(i, group_->rank());
    std::memcpy(shard + offset_[i], values[i].data<float>() + begin(i), static_cast<size_t>(n) * sizeof(float));
    Tensor master = shard_.slice_flat(offset_[i], {n});
    master.set_requires_grad(whole_[i].requires_grad());
    masters_.push_back(std::move(master));
  }
}

int64_t StageShards::count(size_t i, int r) const {
  return std::clamp<int64_t>(whole_[i].numel() - per_rank_[i] * r, 0, per_rank_[i]);
}

int64_t StageShards::begin(size_t i) const {
  return std::min(whole_[i].numel(), per_rank_[i] * group_->rank());
}

void StageShards::gather() {
  autograd::NoGradGuard no_grad;
  memory::CategoryScope category(memory::Category::communication);
  Tensor all = Tensor::empty({block_ * group_->size()});
  group_->all_gather(shard_, all);
  for (size_t i = 0; i < whole_.size(); ++i) {
    for (int r = 0; r < group_->size(); ++r) {
      const int64_t n = count(i, r);
      if (n == 0) break;
      whole_[i].slice_flat(per_rank_[i] * r, {n}).copy_(all.slice_flat(block_ * r + offset_[i], {n}));
    }
  }
}

std::vector<Tensor> StageShards::reduce(const std::vector<Tensor>& grads) {
  ACC_CHECK(grads.size() == whole_.size(), "pipeline: ", grads.size(), " gradients for ", whole_.size(),
            " sharded parameters");
  const int ranks = group_->size();
  Tensor packed, mine;
  {
    memory::CategoryScope category(memory::Category::communication);
    packed = Tensor::zeros({block_ * ranks});
  }
  float* to = packed.data<float>();
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    const float* g = grads[i].data<float>();
    for (int r = 0; r < ranks; ++r)
      std::memcpy(to + block_ * r + offset_[i], g + per_rank_[i] * r, static_cast<size_t>(count(i, r)) * sizeof(float));
  }
  {
    memory::CategoryScope category(memory::Category::gradients);
    mine = Tensor::empty({block_});
  }
  group_->reduce_scatter(packed, mine, dist::ReduceOp::avg);
  std::vector<Tensor> out;
  for (size_t i = 0; i < grads.size(); ++i) out.push_back(mine.slice_flat(offset_[i], {masters_[i].numel()}));
  return out;
}

}  // namespace acc::pipeline
