#include "acc/distributed/collective_signature.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "acc/distributed/process_group.h"
#include "acc/tensor/dtype.h"
#include "acc/util/activity.h"

namespace acc::dist {

const char* collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_gather: return "all_gather";
    case CollectiveOp::reduce_scatter: return "reduce_scatter";
    case CollectiveOp::all_reduce: return "all_reduce";
    case CollectiveOp::broadcast: return "broadcast";
    case CollectiveOp::barrier: return "barrier";
  }
  return "collective";
}

CollectiveSignature CollectiveSignature::make(uint64_t seq, CollectiveOp op, int32_t dtype,
                                              int64_t numel, int32_t root, int32_t reduce,
                                              int32_t wire_block, int32_t wire_bits) {
  CollectiveSignature s;
  s.seq = seq;
  s.op = op;
  s.dtype = dtype;
  s.numel = numel;
  s.root = root;
  s.reduce = reduce;
  s.wire_block = wire_block;
  s.wire_bits = wire_block > 0 ? wire_bits : 0;
  const std::string where = activity::describe();
  std::memcpy(s.where, where.data(), std::min(where.size(), sizeof s.where - 1));
  return s;
}

std::string CollectiveSignature::describe() const {
  std::string out = std::string(collective_op_name(op)) + " #" + std::to_string(seq) + " (";
  if (dtype >= 0) {
    out += dtype_name(static_cast<DType>(dtype));
    out += ", " + std::to_string(numel) + " elements";
  }
  if (reduce >= 0) out += ", " + reduce_op_name(static_cast<ReduceOp>(reduce));
  if (wire_block > 0)
    out += ", int" + std::to_string(wire_bits) + " wire (block " + std::to_string(wire_block) + ")";
  if (root >= 0) out += ", root " + std::to_string(root);
  const std::string_view place(where, strnlen(where, sizeof where));
  if (!place.empty()) out += (dtype >= 0 ? "; " : "") + std::string(place);
  return out + ")";
}

bool operator==(const CollectiveSignature& a, const CollectiveSignature& b) {
  return a.seq == b.seq && a.op == b.op && a.dtype == b.dtype && a.numel == b.numel &&
         a.root == b.root && a.reduce == b.reduce && a.wire_block == b.wire_block &&
         a.wire_bits == b.wire_bits &&
         std::strncmp(a.where, b.where, sizeof a.where) == 0;
}

std::string signature_mismatch(int rank, const CollectiveSignature& mine, int peer,
                               const CollectiveSignature& theirs) {
  std::string message = "collectives out of order: rank " + std::to_string(rank) + " entered " +
                        mine.describe() + " while rank " + std::to_string(peer) + " entered " +
                        theirs.describe() +
                        "; every rank of a group must issue the same collectives in the same order";
  const auto is_parameter = [](const CollectiveSignature& s) {
    return std::string_view(s.where, strnlen(s.where, sizeof s.where)).find("parameter ") != std::string_view::npos;
  };
  if (mine.op == theirs.op && (is_parameter(mine) || is_parameter(theirs)))
    message += " (a parameter that gets a gradient on some ranks and none on others, as behind a "
               "data-dependent branch, does this: let every rank use it, if only times 0)";
  return message;
}

bool signature_check_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("ACC_CHECK_COLLECTIVES");
    return v == nullptr || std::string_view(v) != "0";
  }();
  return enabled;
}

}  // namespace acc::dist
