// Tensor's autograd members, leaf accumulation and the graph edges of a tensor.
#include "acc/autograd/engine.h"
#include "acc/autograd/grad_math.h"
#include "acc/autograd/node.h"

namespace acc {

namespace autograd {

namespace {

// Sends the gradient reaching a leaf into leaf.grad (created on first use, with the leaf's
// dtype, counted as gradients) or to its gradient sink, then runs the leaf's post-accumulate
// hooks.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf)
      : Node("AccumulateGrad", {}, {leaf->shape}), leaf_(std::move(leaf)) {}

  std::vector<Tensor> apply(const Tensor& incoming) override {
    AutogradMeta& meta = *leaf_->autograd;
    Tensor grad = incoming;
    for (auto& hook : meta.hooks.snapshot())
      if (Tensor replaced = hook(grad); replaced.defined()) grad = replaced;
    if (meta.gradient_sink) {
      meta.gradient_sink(grad);
    } else {
      memory::CategoryScope scope(memory::Category::gradients);
      if (!meta.grad.defined()) {
        meta.grad = Tensor::empty(leaf_->shape, leaf_->dtype);
        meta.grad.copy_(grad);
      } else {
        add_into(meta.grad, grad);
      }
    }
    Tensor leaf(leaf_);
    for (auto& hook : meta.post_accumulate_hooks.snapshot()) hook(leaf);
    return {};
  }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

}  // namespace

AutogradMeta& autograd_meta(const Tensor& t) {
  ACC_CHECK(t.defined(), "autograd: tensor is undefined");
  auto& slot = t.impl()->autograd;
  if (!slot) slot = std::make_shared<AutogradMeta>();
  return *slot;
}

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.impl()->autograd) return nullptr;
  AutogradMeta& meta = *t.impl()->autograd;
  if (meta.grad_fn) return meta.grad_fn;
  if (!meta.requires_grad) return nullptr;
  if (auto existing = meta.accumulator.lock()) return existing;
  auto created = std::make_shared<AccumulateGrad>(t.impl());
  meta.accumulator = created;
  return created;
}

bool adopt_grad(const Tensor& leaf, const Tensor& grad) {
  AutogradMeta& meta = autograd_meta(leaf);
  if (meta.grad.defined() || meta.gradient_sink || !meta.hooks.empty() || !meta.post_accumulate_hooks.empty() ||
      grad.shape() != leaf.shape() || grad.dtype() != leaf.dtype())
    return false;
  meta.grad = grad;
  return true;
}

HookHandle set_gradient_sink(const Tensor& leaf, std::function<void(const Tensor&)> sink) {
  ACC_CHECK(leaf.requires_grad() && !leaf.grad_fn(), "set_gradient_sink: needs a leaf that ",
            "requires grad, got ", leaf.describe());
  AutogradMeta& meta = autograd_meta(leaf);
  ACC_CHECK(!meta.gradient_sink, "set_gradient_sink: ", leaf.describe(), " already has a sink");
  meta.gradient_sink = std::move(sink);
  std::weak_ptr<AutogradMeta> weak = leaf.impl()->autograd;
  return HookHandle([weak] {
    if (auto m = weak.lock()) m->gradient_sink = nullptr;
  });
}

HookHandle register_post_accumulate_hook(const Tensor& leaf, PostAccumulateHook fn) {
  ACC_CHECK(leaf.requires_grad() && !leaf.grad_fn(),
            "register_post_accumulate_hook: needs a leaf that requires grad, got ",
            leaf.describe(), leaf.grad_fn() ? " (a non-leaf)" : " (requires_grad is false)");
  return autograd_meta(leaf).post_accumulate_hooks.add(std::move(fn));
}

}  // namespace autograd

bool Tensor::requires_grad() const {
  if (!defined() || !impl_->autograd) return false;
  return impl_->autograd->requires_grad || impl_->autograd->grad_fn != nullptr;
}

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  ACC_CHECK(defined(), "Tensor::set_requires_grad: tensor is undefined");
  ACC_CHECK(!grad_fn(), "Tensor::set_requires_grad: ", describe(),
            " is the output of an op (grad_fn ", grad_fn()->name(),
            "); only leaves can change requires_grad; use detach()");
  ACC_CHECK(!requires_grad || is_floating(dtype()), "Tensor::set_requires_grad: ", describe(),
            " has an integer dtype; only f32/bf16 tensors can require grad");
  autograd::autograd_meta(*this).requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const {
  return defined() && impl_->autograd ? impl_->autograd->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) {
  ACC_CHECK(defined(), "Tensor::set_grad: tensor is undefined");
  ACC_CHECK(!grad.defined() || grad.shape() == shape(), "Tensor::set_grad: gradient ",
            grad.describe(), " does not match tensor ", describe());
  autograd::autograd_meta(*this).grad = grad;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  return defined() && impl_->autograd ? impl_->autograd->grad_fn : nullptr;
}

void Tensor::backward(const Tensor& seed) const { autograd::backward(*this, seed); }

Tensor Tensor::detach() const {
  ACC_CHECK(defined(), "Tensor::detach: tensor is undefined");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->offset = impl_->offset;
  impl->shape = impl_->shape;
  impl->dtype = impl_->dtype;
  return Tensor(std::move(impl));
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) {
  ACC_CHECK(requires_grad(), "Tensor::register_hook: ", describe(),
            " does not require grad, so no gradient will ever reach the hook");
  if (auto node = grad_fn())
    node->pre_hooks().add(std::move(hook));
  else
    autograd::autograd_meta(*this).hooks.add(std::move(hook));
}

}  // namespace acc
