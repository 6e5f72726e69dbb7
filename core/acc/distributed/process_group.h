#pragma once
// acc::dist::ProcessGroup: the only way strategies talk to other ranks. Collectives work on
// flat tensors of f32, bf16 (summed with f32 accumulation), i32 or i64.
//
// Sizes. all_gather(input n -> output size*n) and reduce_scatter(input size*n -> output n) move
// equal chunks: this is the fast path, and strategies pad flat buffers to a multiple of the
// group size to stay on it. Uneven chunks go through the *_v variants, which take the element
// count of every rank's chunk (chunk i lives at offset counts[0] + ... + counts[i-1]).
//
// Every call is asynchronous underneath: *_async returns a Work, the plain call waits on it.
// An all_gather may be urgent (Lane): see there.
// The Work keeps the tensors it reads and writes alive until it has completed.
// All ranks of a group must issue the group's collectives in the same order. A backend runs a
// process's collectives one after another in issue order, across all its groups (point to
// point may overlap them): a collective may therefore read a buffer an earlier one, still in
// flight, writes, as FSDP's all-reduce over replicas reads its reduce-scatter's output. Every
// collective has a sequence number per group and a signature (collective_signature.h) that
// backends compare across ranks before moving data, so a rank out of order is an error at once,
// not a hang. The public methods check their arguments (naming op, shapes, dtypes) and hand raw
// buffers to the backend's do_* hooks.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "acc/distributed/traffic.h"
#include "acc/distributed/work.h"
#include "acc/tensor/tensor.h"

namespace acc::dist {

enum class ReduceOp { sum, avg };  // avg: the sum divided by the group size (f32/bf16 only)

// How a reduction's data crosses the wire: as the tensor's dtype, or (block > 0, f32 tensors
// only) block-quantized to `bits` (8 or 4; 4 needs an even block) with one f32 scale per
// `block` elements (kernels/quantize.h), summed in f32 on arrival: ZeRO++'s qgZ, about a
// quarter (int8) or an eighth (int4) of f32's bytes. A rank's own contribution to its chunk is
// not quantized; an all_reduce quantizes the reduced chunks it gathers too, the owner's
// included, so every rank ends with the same values.
struct ReduceWire {
  int64_t block = 0;
  int bits = 8;
  bool quantized() const { return block > 0; }
};

// How a collective is queued. Ordered ones run one after another in issue order (above). An
// urgent one, a gather the compute is about to wait for, may instead run beside the ordered
// ones issued before it, so it never waits behind them (gradient reductions, say): urgent
// collectives keep their order among themselves, and one must not touch a buffer that an
// ordered collective still in flight reads or writes. A backend may treat it as ordered (the
// MPI backend does on one node, where nothing is slow enough to be worth a second lane).
enum class Lane { ordered, urgent };

// A flat block of elements handed to a backend.
struct Buffer {
  void* data = nullptr;
  int64_t numel = 0;
  DType dtype = DType::f32;
  size_t nbytes() const { return static_cast<size_t>(numel) * dtype_size(dtype); }
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "single", "mpi", ...
  const std::string& name() const { return name_; }
  // world_ranks()[i] is the world rank of this group's rank i.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  // Whether the ranks share a node (dist::traffic() counts them apart; a simulated link paces
  // the others).
  Span span() const { return span_; }
  // Whether a message between this rank and group rank `peer` crosses nodes (its two ends do,
  // whatever the group spans).
  Span span_to(int peer) const;
  // "group 'world' (ranks [0, 1, 2])", for messages.
  std::string describe() const;

  // --- asynchronous ---
  std::shared_ptr<Work> all_gather_async(const Tensor& input, const Tensor& output,
                                         Lane lane = Lane::ordered);
  std::shared_ptr<Work> all_gather_v_async(const Tensor& input, const Tensor& output,
                                           const std::vector<int64_t>& counts, Lane lane = Lane::ordered);
  std::shared_ptr<Work> reduce_scatter_async(const Tensor& input, const Tensor& output,
                                             ReduceOp op = ReduceOp::sum);
  std::shared_ptr<Work> reduce_scatter_v_async(const Tensor& input, const Tensor& output,
                                               const std::vector<int64_t>& counts,
                                               ReduceOp op = ReduceOp::sum, ReduceWire wire = {});
  std::shared_ptr<Work> all_reduce_async(const Tensor& tensor, ReduceOp op = ReduceOp::sum,
                                         ReduceWire wire = {});
  std::shared_ptr<Work> broadcast_async(const Tensor& tensor, int root);
  std::shared_ptr<Work> barrier_async();
  // Point to point: tensors must match in numel and dtype on both sides; tag >= 0.
  std::shared_ptr<Work> send_async(const Tensor& tensor, int peer, int tag = 0);
  std::shared_ptr<Work> recv_async(const Tensor& tensor, int peer, int tag = 0);

  // --- synchronous (async + wait) ---
  void all_gather(const Tensor& input, const Tensor& output) {
    all_gather_async(input, output)->wait();
  }
  void all_gather_v(const Tensor& input, const Tensor& output,
                    const std::vector<int64_t>& counts) {
    all_gather_v_async(input, output, counts)->wait();
  }
  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op = ReduceOp::sum) {
    reduce_scatter_async(input, output, op)->wait();
  }
  void reduce_scatter_v(const Tensor& input, const Tensor& output,
                        const std::vector<int64_t>& counts, ReduceOp op = ReduceOp::sum,
                        ReduceWire wire = {}) {
    reduce_scatter_v_async(input, output, counts, op, wire)->wait();
  }
  void all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::sum, ReduceWire wire = {}) {
    all_reduce_async(tensor, op, wire)->wait();
  }
  void broadcast(const Tensor& tensor, int root) { broadcast_async(tensor, root)->wait(); }
  void barrier() { barrier_async()->wait(); }
  void send(const Tensor& tensor, int peer, int tag = 0) { send_async(tensor, peer, tag)->wait(); }
  void recv(const Tensor& tensor, int peer, int tag = 0) { recv_async(tensor, peer, tag)->wait(); }

  // Collective over this group: ranks passing the same color >= 0 form a new group, ordered by
  // (key, rank in this group). A rank passing a negative color joins no group and gets null.
  std::shared_ptr<ProcessGroup> split(int color, int key = 0, const std::string& name = "");

  // Ends the whole job now (all ranks), e.g. after an uncaught exception on this rank.
  virtual void abort(int exit_code) noexcept;
  // Shuts the backend down for this group and every group split from it (acc::shutdown calls
  // it on the world, so MPI is finalized even if a subgroup is still referenced somewhere);
  // later calls on any of them fail at wait().
  virtual void finalize() {}

 protected:
  ProcessGroup(std::string name, std::vector<int> world_ranks);

  // Backend hooks: arguments are already checked. Each completes `work` (maybe later, from
  // another thread) with mark_done() or mark_failed(message naming op, group and peers).
  virtual void do_all_gather(std::shared_ptr<Work> work, Buffer input, Buffer output,
                             std::vector<int64_t> counts, Lane lane) = 0;
  virtual void do_reduce_scatter(std::shared_ptr<Work> work, Buffer input, Buffer output,
                                 std::vector<int64_t> counts, ReduceOp op, ReduceWire wire) = 0;
  virtual void do_all_reduce(std::shared_ptr<Work> work, Buffer tensor, ReduceOp op,
                             ReduceWire wire) = 0;
  virtual void do_broadcast(std::shared_ptr<Work> work, Buffer tensor, int root) = 0;
  virtual void do_barrier(std::shared_ptr<Work> work) = 0;
  virtual void do_send(std::shared_ptr<Work> work, Buffer tensor, int peer, int tag) = 0;
  virtual void do_recv(std::shared_ptr<Work> work, Buffer tensor, int peer, int tag) = 0;
  // Synchronous; `name` is already decided. Returns null when color < 0.
  virtual std::shared_ptr<ProcessGroup> do_split(int color, int key, std::string name) = 0;

 private:
  // The work of one collective, holding `buffers` until it has completed (see Work::hold); its
  // signature's `where` and its description name what this thread is doing (util/activity.h).
  std::shared_ptr<Work> new_work(CollectiveOp op, const Tensor& whole, std::vector<Tensor> buffers,
                                 int root = -1, int reduce = -1, int64_t wire_block = 0, int wire_bits = 0);

  std::string name_;
  std::vector<int> world_ranks_;
  Span span_;  // whether the ranks share a node, for dist::traffic()
  uint64_t next_seq_ = 0;  // collectives issued on this group so far
};

std::string reduce_op_name(ReduceOp op);

}  // namespace acc::dist
