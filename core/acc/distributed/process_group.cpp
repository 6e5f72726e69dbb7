#include "acc/distributed/process_group.h"

#include <cstdlib>
#include <numeric>
#include <sstream>

#include "acc/distributed/environment.h"
#include "acc/distributed/traffic.h"
#include "acc/kernels/quantize.h"
#include "acc/util/error.h"

namespace acc::dist {
namespace {

std::string list_str(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
  return os.str();
}

Buffer buffer_of(const Tensor& t) { return Buffer{t.raw_data(), t.numel(), t.dtype()}; }

void check_defined(const char* op, const char* what, const Tensor& t) {
  ACC_CHECK(t.defined(), op, ": ", what, " tensor is undefined");
}

void check_same_dtype(const char* op, const Tensor& input, const Tensor& output) {
  ACC_CHECK(input.dtype() == output.dtype(), op, ": input is ", input.describe(),
            " but output is ", output.describe(), "; expected the same dtype");
}

void check_avg(const char* op, ReduceOp rop, const Tensor& t) {
  ACC_CHECK(rop != ReduceOp::avg || is_floating(t.dtype()), op, ": avg needs f32 or bf16, got ",
            t.describe(), "; use sum for integer tensors");
}

void check_wire(const char* op, ReduceWire wire, const Tensor& t) {
  ACC_CHECK(wire.block >= 0, op, ": the wire's block ", wire.block, " is negative");
  if (!wire.quantized()) return;
  ACC_CHECK(wire.bits == 8 || (wire.bits == 4 && wire.block % 2 == 0), op, ": a quantized wire has 8 bits, or 4 "
            "with an even block; got ", wire.bits, " bits, block ", wire.block);
  ACC_CHECK(t.dtype() == DType::f32, op, ": a quantized wire quantizes f32, got ", t.describe());
}

// The bytes of `t` as `wire` sends them.
uint64_t wire_bytes_of(const Tensor& t, ReduceWire wire) {
  return wire.quantized() ? static_cast<uint64_t>(kernels::quantized_message_bytes(t.numel(), wire.block, wire.bits))
                          : t.nbytes();
}

}  // namespace

// Whether the ranks share a node (ACC_RANKS_PER_NODE simulates nodes).
Span span_of(const std::vector<int>& world_ranks) {
  const Topology topology = topology_from_env();
  for (int r : world_ranks)
    if (topology.node_of(r) != topology.node_of(world_ranks.front())) return Span::cross_node;
  return Span::node;
}

Span ProcessGroup::span_to(int peer) const {
  return span_of({world_ranks_[static_cast<size_t>(rank())], world_ranks_[static_cast<size_t>(peer)]});
}

ProcessGroup::ProcessGroup(std::string name, std::vector<int> world_ranks)
    : name_(std::move(name)), world_ranks_(std::move(world_ranks)), span_(span_of(world_ranks_)) {}

std::string reduce_op_name(ReduceOp op) { return op == ReduceOp::sum ? "sum" : "avg"; }

std::string ProcessGroup::describe() const {
  std::ostringstream os;
  os << "group '" << name_ << "' (ranks [";
  for (size_t i = 0; i < world_ranks_.size(); ++i) os << (i ? ", " : "") << world_ranks_[i];
  os << "])";
  return os.str();
}

std::shared_ptr<Work> ProcessGroup::new_work(CollectiveOp op, const Tensor& whole,
                                             std::vector<Tensor> buffers, int root, int reduce,
                                             int64_t wire_block, int wire_bits) {
  const auto signature = CollectiveSignature::make(
      next_seq_, op, whole.defined() ? static_cast<int32_t>(whole.dtype()) : -1,
      whole.defined() ? whole.numel() : 0, root, reduce, static_cast<int32_t>(wire_block), wire_bits);
  std::ostringstream os;
  os << collective_op_name(op) << " #" << next_seq_++ << " on " << describe();
  if (signature.where[0] != 0) os << ", during " << signature.where;
  auto work = std::make_shared<Work>(os.str(), signature);
  work->hold(std::move(buffers));
  return work;
}

std::shared_ptr<Work> ProcessGroup::all_gather_async(const Tensor& input, const Tensor& output, Lane lane) {
  check_defined("all_gather", "input", input);
  check_defined("all_gather", "output", output);
  ACC_CHECK(output.numel() == input.numel() * size(), "all_gather: input ", input.describe(),
            " and output ", output.describe(), " on ", describe(), "; expected output numel ",
            input.numel() * size(), " (input numel x group size ", size(),
            "); use all_gather_v for uneven chunks");
  return all_gather_v_async(input, output, std::vector<int64_t>(size(), input.numel()), lane);
}

std::shared_ptr<Work> ProcessGroup::all_gather_v_async(const Tensor& input, const Tensor& output,
                                                       const std::vector<int64_t>& counts, Lane lane) {
  const char* op = "all_gather";
  check_defined(op, "input", input);
  check_defined(op, "output", output);
  check_same_dtype(op, input, output);
  ACC_CHECK(static_cast<int>(counts.size()) == size(), op, ": got ", counts.size(),
            " counts ", list_str(counts), " for ", describe(), "; expected one per rank");
  for (int64_t c : counts) ACC_CHECK(c >= 0, op, ": negative count in ", list_str(counts));
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  ACC_CHECK(input.numel() == counts[rank()] && output.numel() == total, op, ": input ",
            input.describe(), ", output ", output.describe(), ", counts ", list_str(counts),
            " on rank ", rank(), "; expected input numel ", counts[rank()],
            " and output numel ", total);
  auto work = new_work(CollectiveOp::all_gather, output, {input, output});
  work->set_wire_bytes(count_traffic(TrafficKind::all_gather, output.nbytes(), size(), span_));
  do_all_gather(work, buffer_of(input), buffer_of(output), counts, lane);
  return work;
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_async(const Tensor& input, const Tensor& output,
                                                         ReduceOp rop) {
  check_defined("reduce_scatter", "input", input);
  check_defined("reduce_scatter", "output", output);
  ACC_CHECK(input.numel() == output.numel() * size(), "reduce_scatter: input ", input.describe(),
            " and output ", output.describe(), " on ", describe(), "; expected input numel ",
            output.numel() * size(), " (output numel x group size ", size(),
            "); use reduce_scatter_v for uneven chunks");
  return reduce_scatter_v_async(input, output, std::vector<int64_t>(size(), output.numel()), rop);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_v_async(const Tensor& input,
                                                           const Tensor& output,
                                                           const std::vector<int64_t>& counts,
                                                           ReduceOp rop, ReduceWire wire) {
  const char* op = "reduce_scatter";
  check_defined(op, "input", input);
  check_defined(op, "output", output);
  check_same_dtype(op, input, output);
  check_avg(op, rop, input);
  check_wire(op, wire, input);
  ACC_CHECK(static_cast<int>(counts.size()) == size(), op, ": got ", counts.size(),
            " counts ", list_str(counts), " for ", describe(), "; expected one per rank");
  for (int64_t c : counts) ACC_CHECK(c >= 0, op, ": negative count in ", list_str(counts));
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  ACC_CHECK(input.numel() == total && output.numel() == counts[rank()], op, ": input ",
            input.describe(), ", output ", output.describe(), ", counts ", list_str(counts),
            " on rank ", rank(), "; expected input numel ", total, " and output numel ",
            counts[rank()]);
  auto work = new_work(CollectiveOp::reduce_scatter, input, {input, output}, -1, static_cast<int>(rop),
                       wire.block, wire.bits);
  work->set_wire_bytes(count_traffic(TrafficKind::reduce_scatter, wire_bytes_of(input, wire), size(), span_));
  do_reduce_scatter(work, buffer_of(input), buffer_of(output), counts, rop, wire);
  return work;
}

std::shared_ptr<Work> ProcessGroup::all_reduce_async(const Tensor& tensor, ReduceOp rop, ReduceWire wire) {
  check_defined("all_reduce", "", tensor);
  check_avg("all_reduce", rop, tensor);
  check_wire("all_reduce", wire, tensor);
  auto work = new_work(CollectiveOp::all_reduce, tensor, {tensor}, -1, static_cast<int>(rop), wire.block, wire.bits);
  work->set_wire_bytes(count_traffic(TrafficKind::all_reduce, wire_bytes_of(tensor, wire), size(), span_));
  do_all_reduce(work, buffer_of(tensor), rop, wire);
  return work;
}

std::shared_ptr<Work> ProcessGroup::broadcast_async(const Tensor& tensor, int root) {
  check_defined("broadcast", "", tensor);
  ACC_CHECK(root >= 0 && root < size(), "broadcast: root ", root, " is not a rank of ",
            describe(), "; expected 0 <= root < ", size());
  auto work = new_work(CollectiveOp::broadcast, tensor, {tensor}, root);
  work->set_wire_bytes(count_traffic(TrafficKind::broadcast, tensor.nbytes(), size(), span_));
  do_broadcast(work, buffer_of(tensor), root);
  return work;
}

std::shared_ptr<Work> ProcessGroup::barrier_async() {
  auto work = new_work(CollectiveOp::barrier, Tensor(), {});
  do_barrier(work);
  return work;
}

std::shared_ptr<Work> ProcessGroup::send_async(const Tensor& tensor, int peer, int tag) {
  check_defined("send", "", tensor);
  ACC_CHECK(peer >= 0 && peer < size() && peer != rank(), "send: peer ", peer, " on ",
            describe(), " from rank ", rank(), "; expected another rank in [0, ", size(), ")");
  ACC_CHECK(tag >= 0, "send: tag ", tag, " is negative; expected tag >= 0");
  auto work = std::make_shared<Work>(detail::concat("send to rank ", peer, " (tag ", tag, ", ",
                                                    tensor.describe(), ") on ", describe()));
  work->hold({tensor});
  count_traffic(TrafficKind::send, tensor.nbytes(), size(), span_to(peer));
  do_send(work, buffer_of(tensor), peer, tag);
  return work;
}

std::shared_ptr<Work> ProcessGroup::recv_async(const Tensor& tensor, int peer, int tag) {
  check_defined("recv", "", tensor);
  ACC_CHECK(peer >= 0 && peer < size() && peer != rank(), "recv: peer ", peer, " on ",
            describe(), " at rank ", rank(), "; expected another rank in [0, ", size(), ")");
  ACC_CHECK(tag >= 0, "recv: tag ", tag, " is negative; expected tag >= 0");
  auto work = std::make_shared<Work>(detail::concat("recv from rank ", peer, " (tag ", tag,
                                                    ", ", tensor.describe(), ") on ",
                                                    describe()));
  work->hold({tensor});
  do_recv(work, buffer_of(tensor), peer, tag);
  return work;
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key, const std::string& name) {
  ++next_seq_;  // split is a collective: keep sequence numbers aligned across ranks
  return do_split(color, key, name.empty() ? name_ + "/" + std::to_string(color) : name);
}

void ProcessGroup::abort(int exit_code) noexcept { std::_Exit(exit_code); }

}  // namespace acc::dist
