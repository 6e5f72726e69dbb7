#pragma once
// Text and failures shared between ranks, for operations after which every rank must know the
// outcome: when one rank's disk is full during a checkpoint, every rank raises the error
// instead of waiting forever for the one that gave up.
#include <exception>
#include <string>
#include <vector>

#include "acc/distributed/process_group.h"

namespace acc::dist {

// Every rank's `mine`, a flat tensor of any length (the same dtype on every rank), end to end
// in rank order, and how many elements each rank gave. A collective.
struct Gathered {
  Tensor all;
  std::vector<int64_t> counts;
};
Gathered all_gather_uneven(ProcessGroup& group, const Tensor& mine);

// Every rank's string, in rank order. A collective.
std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& mine);

// Whether `mine` is true on any rank of `group` (the same answer on every rank). A collective,
// skipped on a group of one.
bool any_rank(ProcessGroup& group, bool mine);

// A collective: when `error` is set on any rank, every rank throws one acc::Error that starts
// with `what` and names each failing rank with its message. Returns normally when none failed.
void raise_if_any_failed(ProcessGroup& group, const std::string& what,
                         const std::exception_ptr& error);

}  // namespace acc::dist
