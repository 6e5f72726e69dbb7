#pragma once
// What a rank says it is entering when it starts a collective. Backends compare the
// signatures of all ranks of the group before any data moves, so a collective issued in a
// different order, with another op, dtype or size, or from another place of the program on
// some rank fails at once on every rank that sees it, naming both sides, instead of hanging
// until the timeout or exchanging the wrong buffers. Plain bytes: it crosses process
// boundaries as is.
#include <cstdint>
#include <string>

namespace acc::dist {

enum class CollectiveOp : int32_t { all_gather, reduce_scatter, all_reduce, broadcast, barrier };
const char* collective_op_name(CollectiveOp op);

struct CollectiveSignature {
  uint64_t seq = 0;  // the collective's number in its group
  CollectiveOp op = CollectiveOp::barrier;
  int32_t dtype = -1;  // DType, -1 for a barrier
  int64_t numel = 0;   // elements of the whole: all_gather's output, reduce_scatter's input
  int32_t root = -1;   // broadcast's root
  int32_t reduce = -1; // ReduceOp of the reductions
  int32_t wire_block = 0;  // ReduceWire::block of the reductions
  int32_t wire_bits = 0;   // and its bits (0 when not quantized)
  char where[88] = {}; // activity::describe() when it was issued, cut to fit

  // Builds one; `where` is the issuing thread's activity now.
  static CollectiveSignature make(uint64_t seq, CollectiveOp op, int32_t dtype, int64_t numel,
                                  int32_t root = -1, int32_t reduce = -1, int32_t wire_block = 0,
                                  int32_t wire_bits = 0);
  // "all_gather #812 (bf16, 3,145,728 elements; step 3, forward, unit transformer.h.3)".
  std::string describe() const;
};
static_assert(sizeof(CollectiveSignature) == 128, "one cache line pair, sent as bytes");

bool operator==(const CollectiveSignature& a, const CollectiveSignature& b);

// The error of a mismatch between this rank's signature and a peer's (world ranks).
std::string signature_mismatch(int rank, const CollectiveSignature& mine, int peer,
                               const CollectiveSignature& theirs);

// Whether backends compare signatures: on unless ACC_CHECK_COLLECTIVES=0.
bool signature_check_enabled();

}  // namespace acc::dist
