#pragma once
// A backward in two parts, for zero-bubble pipeline schedules (Qi et al., 2023, arXiv
// 2401.10241): the first gives the gradients of a stage's inputs, which the stage before waits
// for; the weights' gradients, which nobody waits for, come from the second, run when the stage
// would otherwise idle.
//
// split_grad runs the first part: every gradient between `root` and `inputs`, and at each
// separable node (Inputs::separable: linear, matmul) the inputs that are not weights. It keeps,
// for the second part, those nodes with their output's gradient (or what the node asked to keep
// instead, autograd::keep_for_later_call: a product's gradient cast to its dtype) and the weight side: the
// `weights`' accumulators and the chains of one-input nodes that end at one (a transpose, a cast,
// an embedding lookup). A node that is not separable computes all of its gradients in the first
// part: those it gives a weight directly (a fused loss's weight gradient) are handed out then,
// the others towards a weight wait, summed, for the second.
#include <memory>
#include <vector>

#include "acc/tensor/tensor.h"

namespace acc::autograd {

class Node;
namespace detail {
struct WeightSide;
}

struct SplitGradients;

class WeightGradients {
 public:
  WeightGradients() = default;
  // The second part, once: each weight's gradient (undefined where the root does not reach it).
  std::vector<Tensor> compute();
  bool pending() const { return side_ != nullptr; }

 private:
  friend SplitGradients split_grad(const Tensor&, const Tensor&, const std::vector<Tensor>&,
                                   const std::vector<Tensor>&);
  std::shared_ptr<detail::WeightSide> side_;
  std::vector<std::shared_ptr<Node>> weight_nodes_;  // per weight; null: no gradient
};

struct SplitGradients {
  std::vector<Tensor> inputs;  // d(root)/d(inputs), as autograd::grad gives them
  // Per weight, what the first part gave it already (undefined: nothing); the second part's
  // gradients are the rest, to be added.
  std::vector<Tensor> weights_now;
  WeightGradients weights;
};

SplitGradients split_grad(const Tensor& root, const Tensor& seed, const std::vector<Tensor>& inputs,
                          const std::vector<Tensor>& weights);

}  // namespace acc::autograd
