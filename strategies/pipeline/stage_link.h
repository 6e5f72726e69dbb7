#pragma once
// Tensors between neighbouring pipeline stages over a pipeline group's point to point: each
// message is a small header (dtype and shape) then the data, so the receiver needs to know
// neither. Sends are asynchronous (a stage never waits for its neighbour to take an
// activation); receives wait, under the backend's timeout. A broadcast to the whole group
// (evaluation's output) goes the same way.
#include <memory>
#include <vector>

#include "acc/distributed/process_group.h"

namespace acc::pipeline {

class StageLink {
 public:
  explicit StageLink(std::shared_ptr<dist::ProcessGroup> group) : group_(std::move(group)) {}
  void send(const Tensor& tensor, int peer, int tag);
  Tensor recv(int peer, int tag);
  // `root`'s tensor (undefined there: undefined everywhere) on every rank of the group.
  Tensor broadcast(const Tensor& tensor, int root);
  // Waits for every send so far (their buffers are then free).
  void flush();

 private:
  std::shared_ptr<dist::ProcessGroup> group_;
  std::vector<std::shared_ptr<dist::Work>> sends_;
};

}  // namespace acc::pipeline
