#include "acc/autograd/engine.h"

#include "acc/autograd/engine_pass.h"
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

// The inputs the node being applied on this thread is asked for (input_wanted); null: all.
thread_local const std::vector<bool>* t_wanted = nullptr;
// Where keep_for_later_call puts the gradient the engine keeps for the node's later call;
// null when no later call follows.
thread_local Tensor* t_kept = nullptr;

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

void run_callbacks(const PassScope& pass) {
  if (!pass.outermost()) return;
  // A callback may queue further callbacks; run until none are left.
  while (!t_pass.callbacks.empty()) {
    auto callbacks = std::move(t_pass.callbacks);
    t_pass.callbacks.clear();
    for (auto& fn : callbacks) fn();
  }
}

bool weight_side(const detail::WeightSide* split, Node* node) { return split && split->nodes.count(node) > 0; }

// Number of edges into each node reachable from root (not entering the weight side): a node
// runs once all have delivered.
std::unordered_map<Node*, int> count_dependencies(Node* root, const detail::WeightSide* split) {
  std::unordered_map<Node*, int> deps{{root, 0}};
  std::vector<Node*> stack{root};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const auto& next : node->next()) {
      if (!next || weight_side(split, next.get())) continue;
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

// node->apply(grad) asking for the inputs in `wanted` (null: all); the others' gradients are
// dropped, whatever the node returned for them. `kept`: where what the node keeps for a later
// call goes (keep_for_later_call), null when none follows.
std::vector<Tensor> apply_for(Node& node, const Tensor& grad, const std::vector<bool>* wanted,
                              Tensor* kept = nullptr) {
  struct Asking {  // t_wanted and t_kept for the call, restored however it ends (a node may nest a pass)
    const std::vector<bool>* outer;
    Tensor* outer_kept;
    ~Asking() {
      t_wanted = outer;
      t_kept = outer_kept;
    }
  } asking{std::exchange(t_wanted, wanted), std::exchange(t_kept, kept)};
  std::vector<Tensor> grads = node.apply(grad);
  check_input_grads(node, grads);
  if (wanted)
    for (size_t i = 0; i < grads.size(); ++i)
      if (!(*wanted)[i]) grads[i] = Tensor();
  return grads;
}

void add_to(std::unordered_map<Node*, Tensor>& pending, Node* node, Tensor grad) {
  Tensor& slot = pending[node];
  slot = slot.defined() ? sum_gradients(std::move(slot), grad) : std::move(grad);
}

// The gradient reaching `node` after its pre-hooks.
Tensor hooked(Node& node, Tensor grad) {
  for (auto& hook : node.pre_hooks().snapshot())
    if (Tensor replaced = hook(grad); replaced.defined()) grad = replaced;
  return grad;
}

Tensor* capture_slot(detail::Captures* captures, Node* node) {
  if (!captures) return nullptr;
  auto it = captures->find(node);
  return it == captures->end() ? nullptr : &it->second;
}

}  // namespace

namespace detail {

void execute(const std::shared_ptr<Node>& root, Tensor seed, Captures* captures, WeightSide* split) {
  PassScope pass;
  {
    NoGradGuard no_grad;  // backward closures are not themselves recorded
    memory::CategoryScope scope(memory::Category::activations);
    if (weight_side(split, root.get())) {
      split->delivered[root.get()] = std::move(seed);
      return;
    }
    auto deps = count_dependencies(root.get(), split);
    std::unordered_map<Node*, Tensor> pending{{root.get(), std::move(seed)}};
    std::vector<std::shared_ptr<Node>> ready{root};
    while (!ready.empty()) {
      std::shared_ptr<Node> node = std::move(ready.back());
      ready.pop_back();
      Tensor grad = std::move(pending[node.get()]);
      pending.erase(node.get());
      std::vector<Tensor> input_grads(node->next().size());
      if (grad.defined()) {
        grad = hooked(*node, std::move(grad));
        if (Tensor* slot = capture_slot(captures, node.get())) {
          *slot = std::move(grad);
        } else {
          // A separable node feeding the weight side gives its other inputs' gradients now
          // and is kept, with its output's gradient, to give the weight side's later.
          std::vector<bool> now;
          bool defers = false;
          if (split && node->separable()) {
            now.resize(node->next().size());
            for (size_t i = 0; i < now.size(); ++i) {
              now[i] = node->next()[i] && !weight_side(split, node->next()[i].get());
              defers |= node->next()[i] && !now[i];
            }
          }
          Tensor kept;  // what the node asked to be kept instead of its output's gradient
          input_grads = apply_for(*node, grad, defers ? &now : nullptr, defers ? &kept : nullptr);
          if (defers)
            split->deferred.emplace_back(node, kept.defined() ? std::move(kept) : std::move(grad));
          else
            node->release();
          grad = Tensor();
        }
      }
      for (size_t i = 0; i < node->next().size(); ++i) {
        const auto& next = node->next()[i];
        if (!next) continue;
        if (weight_side(split, next.get())) {
          if (!input_grads[i].defined()) continue;
          const bool weight = split->early.count(next.get()) > 0;
          add_to(weight ? split->early : split->delivered, next.get(), std::move(input_grads[i]));
          continue;
        }
        if (input_grads[i].defined()) add_to(pending, next.get(), std::move(input_grads[i]));
        if (--deps[next.get()] == 0) ready.push_back(next);
      }
    }
  }
  run_callbacks(pass);
}

void execute_weight_side(WeightSide& split, Captures& captures) {
  PassScope pass;
  {
    NoGradGuard no_grad;
    memory::CategoryScope scope(memory::Category::activations);
    // Edges into each weight-side node from the kept nodes and from the side itself; those from
    // nodes that ran whole in the first part have delivered already.
    std::unordered_map<Node*, int> deps;
    for (const auto& [node, owner] : split.nodes) deps.try_emplace(node, 0);
    auto count_edges = [&](const Node& node) {
      for (const auto& next : node.next())
        if (next && split.nodes.count(next.get())) ++deps[next.get()];
    };
    for (const auto& [node, grad] : split.deferred) count_edges(*node);
    for (const auto& [node, owner] : split.nodes) count_edges(*node);
    std::vector<std::shared_ptr<Node>> ready;
    for (const auto& [node, count] : deps)
      if (count == 0) ready.push_back(split.nodes.at(node));
    auto deliver = [&](const Node& node, std::vector<Tensor>& grads) {
      for (size_t i = 0; i < node.next().size(); ++i) {
        const auto& next = node.next()[i];
        if (!next || !split.nodes.count(next.get())) continue;
        if (i < grads.size() && grads[i].defined()) add_to(split.delivered, next.get(), std::move(grads[i]));
        if (--deps[next.get()] == 0) ready.push_back(next);
      }
    };
    for (auto& [node, grad] : split.deferred) {
      std::vector<bool> later(node->next().size());
      for (size_t i = 0; i < later.size(); ++i)
        later[i] = node->next()[i] && split.nodes.count(node->next()[i].get()) > 0;
      std::vector<Tensor> grads = apply_for(*node, grad, &later);
      node->release();
      grad = Tensor();
      deliver(*node, grads);
    }
    split.deferred.clear();
    while (!ready.empty()) {
      std::shared_ptr<Node> node = std::move(ready.back());
      ready.pop_back();
      std::vector<Tensor> grads;
      if (auto it = split.delivered.find(node.get()); it != split.delivered.end()) {
        Tensor grad = hooked(*node, std::move(it->second));
        split.delivered.erase(it);
        if (Tensor* slot = capture_slot(&captures, node.get())) {
          *slot = std::move(grad);
        } else {
          grads = apply_for(*node, grad, nullptr);
          node->release();
        }
      }
      deliver(*node, grads);
    }
  }
  run_callbacks(pass);
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

std::vector<std::shared_ptr<Node>> gradient_edges(const std::vector<Tensor>& tensors) {
  std::vector<std::shared_ptr<Node>> out;
  for (const auto& t : tensors) out.push_back(gradient_edge(t));
  return out;
}

Captures capture_slots(const std::vector<std::shared_ptr<Node>>& nodes) {
  Captures out;
  for (const auto& n : nodes)
    if (n) out.emplace(n.get(), Tensor());
  return out;
}

std::vector<Tensor> take_captured(const std::vector<std::shared_ptr<Node>>& nodes, Captures& captures) {
  std::vector<Tensor> out;
  for (const auto& n : nodes) out.push_back(n ? captures[n.get()] : Tensor());  // a node twice: both get it
  for (auto& [node, grad] : captures) grad = Tensor();
  return out;
}

}  // namespace detail

void backward(const Tensor& root, const Tensor& seed) {
  activity::Phase phase("backward");
  auto node = detail::root_node(root, "backward");
  detail::execute(node, detail::seed_for(root, seed, "backward"), nullptr);
}

std::vector<Tensor> grad(const Tensor& root, const Tensor& seed, const std::vector<Tensor>& inputs) {
  auto node = detail::root_node(root, "autograd::grad");
  const auto input_nodes = detail::gradient_edges(inputs);
  detail::Captures captures = detail::capture_slots(input_nodes);
  detail::execute(node, detail::seed_for(root, seed, "autograd::grad"), &captures);
  return detail::take_captured(input_nodes, captures);
}

bool in_backward() { return t_pass.depth > 0; }

bool input_wanted(size_t i) { return !t_wanted || (i < t_wanted->size() && (*t_wanted)[i]); }

bool keep_for_later_call(Tensor grad) {
  if (!t_kept) return false;
  *t_kept = std::move(grad);
  return true;
}

void queue_callback(std::function<void()> fn) {
  ACC_CHECK(t_pass.depth > 0, "queue_callback: no backward pass is running on this thread");
  t_pass.callbacks.push_back(std::move(fn));
}

}  // namespace acc::autograd
