#pragma once
// The engine's passes, shared by engine.cpp and split_grad.cpp; not part of the API.
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "acc/autograd/node.h"

namespace acc::autograd::detail {

using Captures = std::unordered_map<Node*, Tensor>;

// The gradient edges of `tensors` (their accumulators or grad_fns; null for one without), kept
// alive by the vector: what a pass captures gradients at.
std::vector<std::shared_ptr<Node>> gradient_edges(const std::vector<Tensor>& tensors);
// An empty capture slot for each of `nodes` but the null ones.
Captures capture_slots(const std::vector<std::shared_ptr<Node>>& nodes);
// What the slots of `nodes` caught, in their order (undefined for a null node); the slots are
// left empty, so the captures hold no gradient after.
std::vector<Tensor> take_captured(const std::vector<std::shared_ptr<Node>>& nodes, Captures& captures);

// The part of a graph a split backward leaves for later (split_grad.h): `nodes`, the weight
// side, are not run by the first part; what reaches them is summed in `delivered` (what reaches
// a weight's accumulator, a key of `early`, there instead: it is handed out at once), and each
// separable node with an edge into them is kept in `deferred` with its output's gradient (or
// what the node kept instead, keep_for_later_call).
struct WeightSide {
  std::unordered_map<Node*, std::shared_ptr<Node>> nodes;
  Captures early;
  std::unordered_map<Node*, Tensor> delivered;
  std::vector<std::pair<std::shared_ptr<Node>, Tensor>> deferred;
};

// Runs the graph below `root`. Gradients reaching a node in `captures` are stored there and
// the node is not run. With `split`, the first part of a split backward.
void execute(const std::shared_ptr<Node>& root, Tensor seed, Captures* captures, WeightSide* split = nullptr);
// The second part: the kept nodes for their weight-side inputs, then the weight side, whose
// gradients reaching a node in `captures` are stored there.
void execute_weight_side(WeightSide& split, Captures& captures);

// root's grad_fn (or accumulator); an error naming `op` when it has none.
std::shared_ptr<Node> root_node(const Tensor& root, const char* op);
// The f32 gradient a pass starts from: `seed`, or 1 for a scalar root.
Tensor seed_for(const Tensor& root, const Tensor& seed, const char* op);

}  // namespace acc::autograd::detail
