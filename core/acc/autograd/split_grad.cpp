#include "acc/autograd/split_grad.h"

#include <functional>
#include <utility>
#include <unordered_set>

#include "acc/autograd/engine_pass.h"
#include "acc/util/activity.h"

namespace acc::autograd {

namespace {

// The weight side of the graph below root: the accumulators in `bases` and every node whose
// only input with a gradient is on the weight side.
void find_weight_side(const std::shared_ptr<Node>& root, const std::unordered_set<Node*>& bases,
                      detail::WeightSide& side) {
  std::unordered_map<Node*, bool> known;
  std::function<bool(const std::shared_ptr<Node>&)> on_side = [&](const std::shared_ptr<Node>& node) {
    if (auto it = known.find(node.get()); it != known.end()) return it->second;
    bool yes = bases.count(node.get()) > 0;
    if (!yes) {
      const std::shared_ptr<Node>* only = nullptr;
      int edges = 0;
      for (const auto& next : node->next())
        if (next) {
          ++edges;
          only = &next;
        }
      yes = edges == 1 && on_side(*only);
    }
    known[node.get()] = yes;
    if (yes) side.nodes.emplace(node.get(), node);
    return yes;
  };
  std::unordered_set<Node*> seen{root.get()};
  std::vector<std::shared_ptr<Node>> stack{root};
  while (!stack.empty()) {
    auto node = std::move(stack.back());
    stack.pop_back();
    if (on_side(node)) continue;
    for (const auto& next : node->next())
      if (next && seen.insert(next.get()).second) stack.push_back(next);
  }
}

}  // namespace

SplitGradients split_grad(const Tensor& root, const Tensor& seed, const std::vector<Tensor>& inputs,
                          const std::vector<Tensor>& weights) {
  activity::Phase phase("backward");
  auto node = detail::root_node(root, "autograd::split_grad");
  SplitGradients out;
  auto& side = *(out.weights.side_ = std::make_shared<detail::WeightSide>());
  const auto& weight_nodes = out.weights.weight_nodes_ = detail::gradient_edges(weights);
  side.early = detail::capture_slots(weight_nodes);
  std::unordered_set<Node*> bases;
  for (const auto& n : weight_nodes)
    if (n) bases.insert(n.get());
  const auto input_nodes = detail::gradient_edges(inputs);
  for (size_t i = 0; i < inputs.size(); ++i)
    ACC_CHECK(!input_nodes[i] || !bases.count(input_nodes[i].get()), "autograd::split_grad: ", inputs[i].describe(),
              " is among both the inputs and the weights");
  detail::Captures captures = detail::capture_slots(input_nodes);
  find_weight_side(node, bases, side);
  detail::execute(node, detail::seed_for(root, seed, "autograd::split_grad"), &captures, &side);
  out.inputs = detail::take_captured(input_nodes, captures);
  out.weights_now = detail::take_captured(weight_nodes, side.early);
  return out;
}

std::vector<Tensor> WeightGradients::compute() {
  ACC_CHECK(side_, "WeightGradients::compute: the weights' gradients were computed already (or never split)");
  activity::Phase phase("backward");
  detail::Captures captures = detail::capture_slots(weight_nodes_);
  detail::execute_weight_side(*side_, captures);
  side_.reset();
  std::vector<Tensor> out = detail::take_captured(weight_nodes_, captures);
  weight_nodes_.clear();
  return out;
}

}  // namespace acc::autograd
