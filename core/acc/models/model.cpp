#include "acc/models/model.h"

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
  ModelOutput out;
  out.logits = logits(batch["input_ids"]);
  if (batch.contains("labels")) {
    const Tensor& labels = batch["labels"];
    ACC_CHECK(labels.shape() == batch["input_ids"].shape(), type_name(), ": labels ",
              labels.describe(), " must have the shape of input_ids ",
              batch["input_ids"].describe());
    const int64_t rows = labels.numel();
    // In bf16 compute the head's backward rounds dlogits to bf16: have the loss write them so.
    out.loss = ops::cross_entropy(ops::reshape(out.logits, {rows, vocab_size()}),
                                  labels.view({rows}), ops::kIgnoreIndex, compute_dtype_);
  }
  return out;
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
