#include "acc/distributed/single_process_group.h"

#include <cstring>

#include "acc/util/error.h"

namespace acc::dist {

// With one rank the sum and the average of one contribution are the contribution itself, and
// a quantized wire has nothing to carry.
void SingleProcessGroup::do_all_gather(std::shared_ptr<Work> work, Buffer input, Buffer output,
                                       std::vector<int64_t>, Lane) {
  if (input.data != output.data) std::memmove(output.data, input.data, input.nbytes());
  work->mark_done();
}

void SingleProcessGroup::do_reduce_scatter(std::shared_ptr<Work> work, Buffer input,
                                           Buffer output, std::vector<int64_t>, ReduceOp, ReduceWire) {
  if (input.data != output.data) std::memmove(output.data, input.data, output.nbytes());
  work->mark_done();
}

void SingleProcessGroup::do_all_reduce(std::shared_ptr<Work> work, Buffer, ReduceOp, ReduceWire) {
  work->mark_done();
}

void SingleProcessGroup::do_broadcast(std::shared_ptr<Work> work, Buffer, int) {
  work->mark_done();
}

void SingleProcessGroup::do_barrier(std::shared_ptr<Work> work) { work->mark_done(); }

// The public send/recv already reject peer == rank, the only rank there is.
void SingleProcessGroup::do_send(std::shared_ptr<Work>, Buffer, int, int) {
  ACC_FAIL("send: a single-process group has no peers");
}

void SingleProcessGroup::do_recv(std::shared_ptr<Work>, Buffer, int, int) {
  ACC_FAIL("recv: a single-process group has no peers");
}

std::shared_ptr<ProcessGroup> SingleProcessGroup::do_split(int color, int, std::string name) {
  if (color < 0) return nullptr;
  return std::make_shared<SingleProcessGroup>(std::move(name), world_ranks()[0]);
}

std::shared_ptr<ProcessGroup> self_group(const ProcessGroup& group) {
  return std::make_shared<SingleProcessGroup>(group.name() + "/self", group.world_ranks()[group.rank()]);
}

}  // namespace acc::dist
