#pragma once
// Recording ops on the tape, and user-defined differentiable functions.
#include <functional>
#include <string>
#include <vector>

#include "acc/tensor/tensor.h"

namespace acc::autograd {

// Given the gradient of an op's output, the gradients of its inputs (same order as recorded;
// undefined where an input needs none). A closure: the tensors it captures are the op's saved
// tensors and are released as soon as the node has run.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad)>;

// True when grad mode is on and some input requires grad, i.e. the op must be recorded.
bool needs_grad(const std::vector<Tensor>& inputs);

// How a recorded backward treats its inputs: `whole` computes every input's gradient at once;
// `separable` only those input_wanted() asks for, and may be run again for the others (a split
// backward, split_grad.h, computes a weight's gradient apart from the input's).
enum class Inputs { whole, separable };

// Makes `output` (a fresh tensor without autograd state) the result of op `name` over `inputs`
// when needs_grad(inputs). Ops capture only detached tensors in `backward` (never `output`
// itself, whose grad_fn is this node).
void record(std::string name, const Tensor& output, const std::vector<Tensor>& inputs,
            BackwardFn backward, Inputs kind = Inputs::whole);

// Inside a separable backward: whether the engine wants input i's gradient from this call
// (always, except in the parts of a split backward).
bool input_wanted(size_t i);

// Inside a separable backward that leaves some of its inputs to a later call (the first part of
// a split backward): keep `grad` for that call instead of the output's gradient; the later call
// receives it as its gradient. For a gradient the later call needs in another form only (in the
// product's dtype: made once, and bf16 held instead of f32). Returns whether a later call
// follows (false: nothing is kept).
bool keep_for_later_call(Tensor grad);

// Custom functions: forward runs with grad mode off, so its internals are not taped; backward
// (which may run a nested forward + backward) maps the output gradient to input gradients.
struct FunctionContext {
  std::vector<Tensor> saved;            // released after backward has run
  std::vector<bool> needs_input_grad;   // per input
};
using ForwardFn = std::function<Tensor(FunctionContext&, const std::vector<Tensor>& inputs)>;
using CustomBackwardFn = std::function<std::vector<Tensor>(FunctionContext&, const Tensor& grad)>;

struct FunctionOptions {
  // Record even when no input requires grad (grad mode still has to be on): for functions whose
  // backward reaches parameters by itself, as checkpointing does.
  bool always_record = false;
};

Tensor apply_function(std::string name, const std::vector<Tensor>& inputs, ForwardFn forward,
                      CustomBackwardFn backward, FunctionOptions options = {});

// Activation checkpointing: runs fn(input) without recording, keeping only `input`; the
// backward recomputes fn with grad enabled and back-propagates through it (gradients of the
// parameters fn uses accumulate into their .grad as usual).
Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& input);

}  // namespace acc::autograd
