#include "acc/models/model.h"

#include "acc/autograd/grad_mode.h"
#include "acc/models/layers.h"
#include "acc/ops/ops.h"

namespace acc::models {

void Model::set_compute_dtype(DType dtype) {
  ACC_CHECK(is_floating(dtype), type_name(), ": compute dtype must be f32 or bf16, got ",
            dtype_name(dtype));
  compute_dtype_ = dtype;
}

int64_t Model::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, p] : named_parameters()) n += p.numel();
  return n;
}

ModelOutput CausalLM::forward(const data::Batch& batch) {
  return head_output(hidden_states(batch["input_ids"]), batch);
}

Tensor CausalLM::hidden_states(const Tensor& input_ids) {
  Tensor x = embed(input_ids);
  const nn::ModuleList& chain = layers();
  for (size_t i = 0; i < chain.size(); ++i) x = chain[i](x);
  return final_norm(x);
}

ModelOutput CausalLM::head_output(const Tensor& hidden, const data::Batch& batch) {
  ModelOutput out;
  const Tensor& ids = batch["input_ids"];
  const bool training = autograd::GradMode::is_enabled();
  if (!batch.contains("labels") || !training || return_logits_)
    out.logits = project(hidden);
  if (!batch.contains("labels")) return out;
  const Tensor& labels = batch["labels"];
  ACC_CHECK(labels.shape() == ids.shape(), type_name(), ": labels ", labels.describe(),
            " must have the shape of input_ids ", ids.describe());
  const int64_t rows = labels.numel();
  if (head_loss_)
    out.loss = head_loss_(ops::reshape(hidden, {rows, hidden.size(-1)}), head_weight(), labels.view({rows}));
  else if (out.logits.defined())  // in bf16 compute the head's backward rounds dlogits to bf16 anyway
    out.loss = ops::cross_entropy(ops::reshape(out.logits, {rows, vocab_size()}),
                                  labels.view({rows}), ops::kIgnoreIndex, compute_dtype_);
  else
    out.loss = ops::linear_cross_entropy(hidden, head_weight(), labels.view({rows}));
  return out;
}

Tensor CausalLM::logits(const Tensor& input_ids) { return project(hidden_states(input_ids)); }

Tensor CausalLM::project(const Tensor& hidden) {
  return head_logits_ ? head_logits_(hidden, head_weight()) : ops::linear(hidden, head_weight());
}

void CausalLM::check_input_ids(const Tensor& ids) const {
  ACC_CHECK(ids.defined() && (ids.dtype() == DType::i32 || ids.dtype() == DType::i64) &&
                ids.dim() == 2,
            type_name(), ": input_ids must be i32/i64 [batch, seq], got ",
            ids.defined() ? ids.describe() : std::string("an undefined tensor"));
  ACC_CHECK(ids.size(1) >= 1 && ids.size(1) <= max_seq_len(), type_name(), ": sequence length ",
            ids.size(1), " is outside [1, ", max_seq_len(), "] (the model's positions)");
}

}  // namespace acc::models
