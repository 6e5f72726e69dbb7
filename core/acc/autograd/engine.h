#pragma once
// The backward engine: runs the nodes reachable from a root in dependency order, sums the
// gradients that meet at a node, and releases each node's saved tensors as soon as it has run.
// Backward is re-entrant: a node may itself run a forward and a nested backward (checkpointing).
#include <functional>
#include <vector>

#include "acc/autograd/hooks.h"
#include "acc/autograd/node.h"
#include "acc/tensor/tensor.h"

namespace acc::autograd {

// Tensor::backward: accumulates d(root)/d(leaf) into every reachable leaf's .grad.
void backward(const Tensor& root, const Tensor& seed = Tensor());

// Gradients of root with respect to `inputs`, returned instead of accumulated into their .grad
// (other leaves reached on the way still accumulate). An input the root does not depend on
// gets an undefined tensor.
std::vector<Tensor> grad(const Tensor& root, const Tensor& seed, const std::vector<Tensor>& inputs);

// Runs fn once when the outermost backward pass that is running on this thread ends (e.g. to
// wait for the last gradient reduction). Throws when no backward is running.
void queue_callback(std::function<void()> fn);

// True while a backward pass runs on this thread: a call boundary reached now is a
// recomputation (activation checkpointing), not a first forward.
bool in_backward();

// sink(grad) receives the leaf's whole gradient of each backward pass (the sum over every use
// of the leaf) instead of leaf.grad: a sharding strategy reduce-scatters it straight into the
// shards, so no full-size gradient is ever stored. The handle removes the sink.
HookHandle set_gradient_sink(const Tensor& leaf, std::function<void(const Tensor& grad)> sink);

// Makes `grad` itself the leaf's .grad, not a copy, when the leaf has no gradient yet and no
// hook or sink would see it (ShardedModel::own_step hands a strategy's gradients over this way,
// so they are not held twice); false, and nothing changed, otherwise.
bool adopt_grad(const Tensor& leaf, const Tensor& grad);

// fn(leaf) runs after a backward pass has updated leaf.grad(); this is where a sharding
// strategy reduce-scatters a gradient as soon as it is complete.
HookHandle register_post_accumulate_hook(const Tensor& leaf, PostAccumulateHook fn);

}  // namespace acc::autograd
