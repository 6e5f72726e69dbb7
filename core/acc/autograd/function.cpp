#include "acc/autograd/function.h"

#include <memory>

#include "acc/autograd/engine.h"
#include "acc/autograd/grad_mode.h"
#include "acc/autograd/nan_check.h"
#include "acc/autograd/node.h"

namespace acc::autograd {

namespace {

// A node whose backward is a closure; releasing it destroys the closure and with it the
// tensors it captured.
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, std::vector<std::shared_ptr<Node>> next,
               std::vector<Shape> input_shapes, BackwardFn backward, Inputs kind)
      : Node(std::move(name), std::move(next), std::move(input_shapes)),
        backward_(std::move(backward)) {
    separable_ = kind == Inputs::separable;
  }

  std::vector<Tensor> apply(const Tensor& grad) override {
    ACC_CHECK(backward_, "backward through ", name(),
              " a second time: its saved tensors were freed after the first backward");
    return backward_(grad);
  }
  void release() override { backward_ = nullptr; }

 private:
  BackwardFn backward_;
};

void attach(std::string name, const Tensor& output, const std::vector<Tensor>& inputs,
            BackwardFn backward, Inputs kind = Inputs::whole) {
  ACC_CHECK(output.defined(), "autograd: op ", name, " produced an undefined output");
  ACC_CHECK(!output.impl()->autograd, "autograd: output of ", name,
            " already has autograd state; ops must return fresh tensors");
  std::vector<std::shared_ptr<Node>> next;
  std::vector<Shape> shapes;
  for (const auto& input : inputs) {
    next.push_back(gradient_edge(input));
    shapes.push_back(input.defined() ? input.shape() : Shape{});
  }
  autograd_meta(output).grad_fn = std::make_shared<FunctionNode>(
      std::move(name), std::move(next), std::move(shapes), std::move(backward), kind);
}

}  // namespace

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const auto& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

void record(std::string name, const Tensor& output, const std::vector<Tensor>& inputs,
            BackwardFn backward, Inputs kind) {
  if (nan_checks_enabled()) check_finite(output, name, "output");
  if (needs_grad(inputs)) attach(std::move(name), output, inputs, std::move(backward), kind);
}

Tensor apply_function(std::string name, const std::vector<Tensor>& inputs, ForwardFn forward,
                      CustomBackwardFn backward, FunctionOptions options) {
  auto ctx = std::make_shared<FunctionContext>();
  for (const auto& input : inputs) ctx->needs_input_grad.push_back(input.requires_grad());
  Tensor output;
  {
    NoGradGuard no_grad;
    output = forward(*ctx, inputs);
  }
  // A fresh handle, so a forward that returns one of its inputs does not relabel that input.
  output = output.detach();
  const bool record_it = options.always_record ? GradMode::is_enabled() : needs_grad(inputs);
  if (record_it)
    attach(std::move(name), output, inputs,
           [ctx, backward = std::move(backward)](const Tensor& grad) {
             return backward(*ctx, grad);
           });
  return output;
}

Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& input) {
  auto forward = [fn](FunctionContext& ctx, const std::vector<Tensor>& inputs) {
    ctx.saved = {inputs[0].detach()};
    return fn(inputs[0]);
  };
  auto backward = [fn](FunctionContext& ctx, const Tensor& grad) -> std::vector<Tensor> {
    NoGradGuard enable_grad(true);
    Tensor x = ctx.saved[0].detach();
    if (ctx.needs_input_grad[0]) x.set_requires_grad(true);
    Tensor y = fn(x);
    ACC_CHECK(y.shape() == grad.shape(), "checkpoint: the recomputed output ", y.describe(),
              " differs in shape from the original's gradient ", grad.describe());
    if (!y.requires_grad()) return {Tensor()};
    return autograd::grad(y, grad, {x});
  };
  return apply_function("Checkpoint", {input}, forward, backward, {.always_record = true});
}

}  // namespace acc::autograd
