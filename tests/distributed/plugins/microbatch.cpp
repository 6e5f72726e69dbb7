// A strategy plugin that runs each training step itself, as a pipeline schedule does: the whole
// model on one rank, the batch cut into two microbatches by rows, each one's forward and
// backward run in turn, the gradients summed (weighted by the labels each microbatch holds, so
// they are the whole batch's mean loss's). Its forward returns ShardedModel::own_step, so the
// caller's loop (forward, loss.backward(), step) is the one of every strategy.
#include <algorithm>
#include <memory>

#include "acc/autograd/engine.h"
#include "acc/autograd/grad_mode.h"
#include "acc/ops/elementwise.h"
#include "acc/ops/loss.h"
#include "acc/plugin/plugin_api.h"
#include "acc/plugin/registry.h"
#include "acc/strategy/strategy.h"

namespace {

using acc::Tensor;

// Rows [begin, end) of every field of the batch.
acc::data::Batch rows(const acc::data::Batch& batch, int64_t begin, int64_t end) {
  acc::data::Batch out;
  for (const auto& [name, t] : batch.tensors()) out.set(name, t.narrow(begin, end - begin).clone());
  return out;
}

int64_t counted_labels(const Tensor& labels) {
  int64_t n = 0;
  for (int64_t label : labels.to_vector_i64()) n += label != acc::ops::kIgnoreIndex;
  return n;
}

class Microbatched : public acc::ShardedModel {
 public:
  explicit Microbatched(std::shared_ptr<acc::models::Model> m) : ShardedModel("Microbatched", std::move(m)) {}

  acc::models::ModelOutput forward(const acc::data::Batch& batch) override {
    const bool training_step = is_training() && acc::autograd::GradMode::is_enabled() && batch.contains("labels");
    if (!training_step) return module().forward(batch);
    std::vector<Tensor> params;
    for (const auto& [_, p] : module().named_parameters())
      if (p.requires_grad()) params.push_back(p);
    const Tensor labels = batch["labels"];
    const int64_t n = labels.size(0), half = (n + 1) / 2;
    const double total = static_cast<double>(std::max<int64_t>(1, counted_labels(labels)));
    std::vector<Tensor> sum(params.size());
    double loss = 0;
    for (const auto& [begin, end] : {std::pair{int64_t{0}, half}, std::pair{half, n}}) {
      if (begin == end) continue;
      const acc::data::Batch micro = rows(batch, begin, end);
      const double weight = static_cast<double>(counted_labels(micro["labels"])) / total;
      if (weight == 0) continue;  // no label counts here: nothing to add
      const Tensor micro_loss = module().forward(micro).loss;
      loss += weight * static_cast<double>(micro_loss.item());
      if (params.empty()) continue;  // everything frozen: a loss, no gradients
      const auto grads = acc::autograd::grad(micro_loss, Tensor(), params);
      for (size_t i = 0; i < params.size(); ++i) {
        if (!grads[i].defined()) continue;
        const Tensor g = acc::ops::scale(grads[i], weight);
        sum[i] = sum[i].defined() ? acc::ops::add(sum[i], g) : g;
      }
    }
    std::vector<std::pair<Tensor, Tensor>> gradients;
    for (size_t i = 0; i < params.size(); ++i)
      if (sum[i].defined()) gradients.emplace_back(params[i], sum[i]);
    return own_step(Tensor::from_vector({static_cast<float>(loss)}, {}), std::move(gradients));
  }
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override {
    return module().named_parameters();
  }
  std::vector<acc::optim::ParamGroup> param_groups(double weight_decay) const override {
    return {acc::optim::ParamGroup{.params = parameters(), .weight_decay = weight_decay}};
  }
};

class MicrobatchStrategy : public acc::Strategy {
 public:
  std::string name() const override { return "third_party_microbatch"; }
  std::shared_ptr<acc::ShardedModel> wrap(std::shared_ptr<acc::models::Model> model) override {
    return std::make_shared<Microbatched>(std::move(model));
  }
};

void register_microbatch(acc::plugin::Registry& registry) {
  registry.add_strategy("third_party_microbatch", [] { return std::make_unique<MicrobatchStrategy>(); });
}

}  // namespace

ACC_PLUGIN("microbatch", register_microbatch)
