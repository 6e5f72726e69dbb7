#pragma once
// The tape: every recorded op output owns a Node (its grad_fn) whose edges point to the nodes
// of the op's inputs (their grad_fn, or an AccumulateGrad for a leaf that requires grad).
// Each node has exactly one output tensor, so it receives one gradient and returns one per
// input. Gradients flowing through the tape are f32 (a split backward's second call of a node
// may get what its first kept instead, keep_for_later_call); leaves convert on accumulation.
#include <memory>
#include <string>
#include <vector>

#include "acc/autograd/hooks.h"
#include "acc/tensor/tensor.h"

namespace acc::autograd {

using TensorHook = std::function<Tensor(const Tensor&)>;
using PostAccumulateHook = std::function<void(Tensor& leaf)>;

class Node {
 public:
  Node(std::string name, std::vector<std::shared_ptr<Node>> next, std::vector<Shape> input_shapes)
      : name_(std::move(name)), next_(std::move(next)), input_shapes_(std::move(input_shapes)) {}
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& name() const { return name_; }
  // One entry per op input; null where that input needs no gradient.
  const std::vector<std::shared_ptr<Node>>& next() const { return next_; }
  const std::vector<Shape>& input_shapes() const { return input_shapes_; }

  // Gradients for each input given the gradient of the output (undefined = zero / not needed).
  virtual std::vector<Tensor> apply(const Tensor& grad) = 0;
  // Drops saved tensors after the node has run, so activations are freed during backward.
  virtual void release() {}
  // Whether apply() computes only the gradients input_wanted() asks for (function.h), so that a
  // split backward (split_grad.h) may take a weight's gradient later than the input's.
  bool separable() const { return separable_; }

  // Hooks on the gradient of this node's output (Tensor::register_hook on a non-leaf).
  HookList<TensorHook>& pre_hooks() { return pre_hooks_; }

 protected:
  bool separable_ = false;

 private:
  std::string name_;
  std::vector<std::shared_ptr<Node>> next_;
  std::vector<Shape> input_shapes_;
  HookList<TensorHook> pre_hooks_;
};

// Autograd state of one tensor (TensorImpl::autograd).
struct AutogradMeta {
  bool requires_grad = false;  // set on leaves; non-leaves require grad through grad_fn
  Tensor grad;
  std::shared_ptr<Node> grad_fn;
  // The leaf's accumulator is owned by the graphs that use it; the leaf only remembers it so
  // that every op in one graph shares a single accumulator.
  std::weak_ptr<Node> accumulator;
  HookList<TensorHook> hooks;  // leaf hooks (a non-leaf's hooks live on its grad_fn)
  HookList<PostAccumulateHook> post_accumulate_hooks;
  // When set, takes the leaf's complete gradient of a pass instead of .grad (see
  // set_gradient_sink).
  std::function<void(const Tensor& grad)> gradient_sink;
};

// The node a gradient for `t` must be sent to: its grad_fn, its leaf accumulator (created on
// first use), or null when t does not require grad.
std::shared_ptr<Node> gradient_edge(const Tensor& t);
// t's AutogradMeta, created when missing.
AutogradMeta& autograd_meta(const Tensor& t);

}  // namespace acc::autograd
