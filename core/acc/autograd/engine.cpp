#include "acc/autograd/engine.h"

#include <unordered_map>

#include "acc/autograd/grad_math.h"
#include "acc/autograd/grad_mode.h"
#include "acc/autograd/nan_check.h"
#include "acc/util/activity.h"

namespace acc::autograd {

namespace {

// Callbacks queued during the backward passes running on this thread; nested (re-entrant)
// passes share the outermost pass's list, which runs when that pass ends.
struct PassState {
  int depth = 0;
  std::vector<std::function<void()>> callbacks;
};
thread_local PassState t_pass;

class PassScope {
 public:
  PassScope() { ++t_pass.depth; }
  ~PassScope() {
    if (--t_pass.depth == 0) t_pass.callbacks.clear();  // only non-empty after an exception
  }
  PassScope(const PassScope&) = delete;
  PassScope& operator=(const PassScope&) = delete;
  bool outermost() const { return t_pass.depth == 1; }
};

// Number of edges into each node reachable from root: a node runs once all have delivered.
std::unordered_map<Node*, int> count_dependencies(Node* root) {
  std::unordered_map<Node*, int> deps{{root, 0}};
  std::vector<Node*> stack{root};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const auto& next : node->next()) {
      if (!next) continue;
      auto [it, inserted] = deps.try_emplace(next.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(next.get());
    }
  }
  return deps;
}

void check_input_grads(const Node& node, const std::vector<Tensor>& grads) {
  ACC_CHECK(grads.size() == node.next().size(), "backward of ", node.name(), " returned ",
            grads.size(), " gradients for ", node.next().size(), " inputs");
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined() || !node.next()[i]) continue;
    ACC_CHECK(grads[i].shape() == node.input_shapes()[i], "backward of ", node.name(),
              ": gradient for input ", i, " is ", grads[i].describe(), " but the input has shape ",
              shape_str(node.input_shapes()[i]));
    if (nan_checks_enabled())
      check_finite(grads[i], node.name() + " (backward)", "gradient for input " + std::to_string(i));
  }
}

Tensor* capture_slot(std::unordered_map<Node*, Tensor>* captures, Node* node) {
  if (!captures) return nullptr;
  auto it = captures->find(node);
  return it == captures->end() ? nullptr : &it->second;
}

// Runs the graph below `root`. Gradients reaching a node in `captures` are stored there and
// the node is not run.
void execute(const std::shared_ptr<Node>& root, Tensor seed,
             std::unordered_map<Node*, Tensor>* captures) {
  PassScope pass;
  {
    NoGradGuard no_grad;  // backward closures are not themselves recorded
    memory::CategoryScope scope(memory::Category::activations);
    auto deps = count_dependencies(root.get());
    std::unordered_map<Node*, Tensor> pending{{root.get(), std::move(seed)}};
    std::vector<std::shared_ptr<Node>> ready{root};
    while (!ready.empty()) {
      std::shared_ptr<Node> node = std::move(ready.back());
      ready.pop_back();
      Tensor grad = std::move(pending[node.get()]);
      pending.erase(node.get());
      std::vector<Tensor> input_grads(node->next().size());
      if (grad.defined()) {
        for (auto& hook : node->pre_hooks().snapshot())
          if (Tensor replaced = hook(grad); replaced.defined()) grad = replaced;
        if (Tensor* slot = capture_slot(captures, node.get())) {
          *slot = std::move(grad);
        } else {
          input_grads = node->apply(grad);
          grad = Tensor();
          node->release();
          check_input_grads(*node, input_grads);
        }
      }
      for (size_t i = 0; i < node->next().size(); ++i) {
        const auto& next = node->next()[i];
        if (!next) continue;
        if (input_grads[i].defined()) {
          Tensor& slot = pending[next.get()];
          slot = slot.defined() ? sum_gradients(std::move(slot), input_grads[i])
                                : std::move(input_grads[i]);
        }
        if (--deps[next.get()] == 0) ready.push_back(next);
      }
    }
  }
  if (pass.outermost()) {
    // A callback may queue further callbacks; run until none are left.
    while (!t_pass.callbacks.empty()) {
      auto callbacks = std::move(t_pass.callbacks);
      t_pass.callbacks.clear();
      for (auto& fn : callbacks) fn();
    }
  }
}

std::shared_ptr<Node> root_node(const Tensor& root, const char* op) {
  ACC_CHECK(root.defined(), op, ": tensor is undefined");
  auto node = gradient_edge(root);
  ACC_CHECK(node, op, ": ", root.describe(),
            " does not require grad and has no grad_fn, so there is nothing to differentiate");
  return node;
}

Tensor seed_for(const Tensor& root, const Tensor& seed, const char* op) {
  if (!seed.defined()) {
    ACC_CHECK(root.numel() == 1, op, ": a seed gradient is needed for non-scalar ",
              root.describe());
    NoGradGuard no_grad;
    return Tensor::full(root.shape(), 1.0);
  }
  ACC_CHECK(seed.shape() == root.shape(), op, ": seed gradient ", seed.describe(),
            " does not match ", root.describe());
  return seed.dtype() == DType::f32 ? seed.detach() : seed.to(DType::f32);
}

}  // namespace

void backward(const Tensor& root, const Tensor& seed) {
  activity::Phase phase("backward");
  auto node = root_node(root, "backward");
  execute(node, seed_for(root, seed, "backward"), nullptr);
}

std::vector<Tensor> grad(const Tensor& root, const Tensor& seed, const std::vector<Tensor>& inputs) {
  auto node = root_node(root, "autograd::grad");
  std::unordered_map<Node*, Tensor> captures;
  std::vector<std::shared_ptr<Node>> input_nodes;  // keeps the inputs' accumulators alive
  for (const auto& input : inputs) {
    input_nodes.push_back(gradient_edge(input));
    if (input_nodes.back()) captures.emplace(input_nodes.back().get(), Tensor());
  }
  execute(node, seed_for(root, seed, "autograd::grad"), &captures);
  std::vector<Tensor> out;
  for (const auto& n : input_nodes) out.push_back(n ? captures[n.get()] : Tensor());
  return out;
}

bool in_backward() { return t_pass.depth > 0; }

void queue_callback(std::function<void()> fn) {
  ACC_CHECK(t_pass.depth > 0, "queue_callback: no backward pass is running on this thread");
  t_pass.callbacks.push_back(std::move(fn));
}

}  // namespace acc::autograd
