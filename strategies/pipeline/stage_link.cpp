#include "stage_link.h"

#include "acc/memory/allocator.h"
#include "acc/util/error.h"

namespace acc::pipeline {
namespace {

constexpr int64_t kMaxDims = 6;
constexpr int64_t kHeader = 3 + kMaxDims;  // defined, dtype, rank, dims

// What a receiver needs to make room for `tensor`.
Tensor header_of(const Tensor& tensor) {
  std::vector<int64_t> header(kHeader, 0);
  if (tensor.defined()) {
    ACC_CHECK(tensor.dim() <= kMaxDims, "pipeline: a ", tensor.describe(), " between stages has more than ",
              kMaxDims, " dims");
    header[0] = 1;
    header[1] = static_cast<int64_t>(tensor.dtype());
    header[2] = tensor.dim();
    for (int64_t d = 0; d < tensor.dim(); ++d) header[static_cast<size_t>(3 + d)] = tensor.size(d);
  }
  return Tensor::from_vector_i64(header, {kHeader});
}

// The tensor a header describes, without values (undefined for an undefined one).
Tensor room_for(const Tensor& header) {
  const int64_t* h = header.data<int64_t>();
  if (h[0] == 0) return Tensor();
  memory::CategoryScope category(memory::Category::activations);
  return Tensor::empty(Shape(h + 3, h + 3 + h[2]), static_cast<DType>(h[1]));
}

}  // namespace

void StageLink::send(const Tensor& tensor, int peer, int tag) {
  // A finished send's buffer is free now, not at the end of the step.
  std::erase_if(sends_, [](const auto& work) {
    if (!work->is_completed()) return false;
    work->wait();  // at once; throws what the send failed with
    return true;
  });
  sends_.push_back(group_->send_async(header_of(tensor), peer, tag));
  sends_.push_back(group_->send_async(tensor.detach(), peer, tag));
}

Tensor StageLink::recv(int peer, int tag) {
  Tensor header = Tensor::empty({kHeader}, DType::i64);
  group_->recv(header, peer, tag);
  Tensor out = room_for(header);
  group_->recv(out, peer, tag);
  return out;
}

Tensor StageLink::broadcast(const Tensor& tensor, int root) {
  const bool mine = group_->rank() == root;
  Tensor header = mine ? header_of(tensor) : Tensor::empty({kHeader}, DType::i64);
  group_->broadcast(header, root);
  Tensor out = mine ? tensor.detach() : room_for(header);
  if (out.defined()) group_->broadcast(out, root);
  return out;
}

void StageLink::flush() {
  for (auto& work : sends_) work->wait();
  sends_.clear();
}

}  // namespace acc::pipeline
