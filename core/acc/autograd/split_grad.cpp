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
  out.weights.side_ = std::make_shared<detail::WeightSide>();
  std::unordered_set<Node*> bases;
  for (const auto& w : weights) {
    out.weights.weight_nodes_.push_back(gradient_edge(w));
    if (!out.weights.weight_nodes_.back()) continue;
    bases.insert(out.weights.weight_nodes_.back().get());
    out.weights.side_->early.emplace(out.weights.weight_nodes_.back().get(), Tensor());
  }
  detail::Captures captures;
  std::vector<std::shared_ptr<Node>> input_nodes;  // keeps the inputs' accumulators alive
  for (const auto& input : inputs) {
    input_nodes.push_back(gradient_edge(input));
    if (!input_nodes.back()) continue;
    ACC_CHECK(!bases.count(input_nodes.back().get()), "autograd::split_grad: ", input.describe(),
              " is among both the inputs and the weights");
    captures.emplace(input_nodes.back().get(), Tensor());
  }
  find_weight_side(node, bases, *out.weights.side_);
  detail::execute(node, detail::seed_for(root, seed, "autograd::split_grad"), &captures, out.weights.side_.get());
  for (const auto& n : input_nodes) out.inputs.push_back(n ? captures[n.get()] : Tensor());
  for (const auto& n : out.weights.weight_nodes_)
    out.weights_now.push_back(n ? std::exchange(out.weights.side_->early[n.get()], Tensor()) : Tensor());
  return out;
}

std::vector<Tensor> WeightGradients::compute() {
  ACC_CHECK(side_, "WeightGradients::compute: the weights' gradients were computed already (or never split)");
  activity::Phase phase("backward");
  detail::Captures captures;
  for (const auto& n : weight_nodes_)
    if (n) captures.emplace(n.get(), Tensor());
  detail::execute_weight_side(*side_, captures);
  side_.reset();
  std::vector<Tensor> out;
  for (const auto& n : weight_nodes_) out.push_back(n ? captures[n.get()] : Tensor());
  weight_nodes_.clear();
  return out;
}

}  // namespace acc::autograd
