#include "stage_link.h"

#include "acc/memory/allocator.h"
#include "acc/util/error.h"

namespace acc::pipeline {
namespace {

constexpr int64_t kMaxDims = 6;
constexpr int64_t kHeader = 2 + kMaxDims;  // dtype, rank, dims

}  // namespace

void StageLink::send(const Tensor& tensor, int peer, int tag) {
  // A finished send's buffer is free now, not at the end of the step.
  std::erase_if(sends_, [](const auto& work) {
    if (!work->is_completed()) return false;
    work->wait();  // at once; throws what the send failed with
    return true;
  });
  ACC_CHECK(tensor.dim() <= kMaxDims, "pipeline: a ", tensor.describe(), " between stages has more than ", kMaxDims,
            " dims");
  std::vector<int64_t> header(kHeader, 0);
  header[0] = static_cast<int64_t>(tensor.dtype());
  header[1] = tensor.dim();
  for (int64_t d = 0; d < tensor.dim(); ++d) header[static_cast<size_t>(2 + d)] = tensor.size(d);
  sends_.push_back(group_->send_async(Tensor::from_vector_i64(header, {kHeader}), peer, tag));
  sends_.push_back(group_->send_async(tensor.detach(), peer, tag));
}

Tensor StageLink::recv(int peer, int tag) {
  Tensor header = Tensor::empty({kHeader}, DType::i64);
  group_->recv(header, peer, tag);
  const int64_t* h = header.data<int64_t>();
  Shape shape(h + 2, h + 2 + h[1]);
  memory::CategoryScope category(memory::Category::activations);
  Tensor out = Tensor::empty(shape, static_cast<DType>(h[0]));
  group_->recv(out, peer, tag);
  return out;
}

void StageLink::flush() {
  for (auto& work : sends_) work->wait();
  sends_.clear();
}

}  // namespace acc::pipeline
