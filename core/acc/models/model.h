#pragma once
// The model-level API of the design's user view: a Model is an nn::Module whose forward takes a
// whole data::Batch and returns logits and the loss, so a training loop (and a sharding
// strategy wrapping the model) never needs to know which fields a model reads. Inside, models
// call their blocks through Module::operator(), where strategies hook them.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "acc/data/dataset.h"
#include "acc/models/structure.h"
#include "acc/nn/containers.h"
#include "acc/nn/module.h"

namespace acc::models {

struct ModelOutput {
  Tensor logits;
  Tensor loss;  // scalar mean cross-entropy against batch["labels"]; undefined without labels
};

class Model : public nn::Module {
 public:
  using nn::Module::Module;
  using nn::Module::forward;
  virtual ModelOutput forward(const data::Batch& batch) = 0;

  // The dtype the parameters are computed in. Mixed precision is the strategy's (it gathers
  // bf16 copies of the f32 master weights and sets this), so a model only needs it where it
  // writes gradients itself: the loss writes its logits gradient in this dtype.
  virtual void set_compute_dtype(DType dtype);
  DType compute_dtype() const { return compute_dtype_; }

  // Model FLOPs of one training step (forward + backward) per token: what MFU is measured with.
  virtual double train_flops_per_token(int64_t seq_len) const = 0;

  // How a Hugging Face safetensors file differs from acc's parameters (none by default).
  // A file name as acc names it (e.g. GPT-2 files without the "transformer." prefix).
  virtual std::string name_from_file(const std::string& file_name) const { return file_name; }
  // Parameters the file stores as [in, out] (GPT-2's Conv1D) instead of acc's [out, in].
  virtual bool stored_transposed(const std::string& /*name*/) const { return false; }
  // File entries that are not parameters (buffers, a tied head) and are skipped on load.
  virtual bool ignored_in_file(const std::string& /*name*/) const { return false; }

  // The model's blocks, shared parameters, token embedding, packed tensors and the groups
  // tensor parallelism splits together (structure.h): what strategies read. None by default.
  virtual Structure structure() const { return {}; }

  int64_t num_parameters() const;

 protected:
  DType compute_dtype_ = DType::f32;
};

// A causal language model over token ids: batch["input_ids"] i32 [B, T] -> logits [B, T, V];
// the loss is against batch["labels"] i32 [B, T] (the inputs shifted by one).
//
// A training forward (labels given, grad mode on) computes the loss without the logits:
// ops::linear_cross_entropy takes the head a chunk of rows at a time, so the [B*T, V] logits
// and their gradient never exist (for GPT-2 small at 8 x 512 tokens, 1.6 GB), and
// ModelOutput::logits is left undefined. set_return_logits(true) asks for them anyway;
// evaluation (no grad) and batches without labels always return them.
class CausalLM : public Model {
 public:
  using Model::Model;
  ModelOutput forward(const data::Batch& batch) override;
  Tensor logits(const Tensor& input_ids);
  // The final normalised hidden states [B, T, C] the head projects: final_norm over the layers
  // in order over embed.
  Tensor hidden_states(const Tensor& input_ids);
  // The chain hidden_states() runs, which a pipeline strategy cuts into stages (Structure::
  // chain names each part's modules): the embedding of input ids (checked), the repeated
  // layers (each [B, T, C] -> [B, T, C]) and the final norm.
  virtual Tensor embed(const Tensor& input_ids) = 0;
  virtual nn::ModuleList& layers() const = 0;
  virtual Tensor final_norm(const Tensor& hidden) = 0;
  // What forward(batch) returns from the final hidden states: the logits and the loss, as
  // described above. The last stage of a pipeline calls it.
  ModelOutput head_output(const Tensor& hidden, const data::Batch& batch);
  // The head's weight [V, C]. It is read outside any submodule's call, so models list it in
  // Structure::shared_parameters (sharding strategies keep it gathered for the step).
  virtual Tensor head_weight() = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_seq_len() const = 0;
  void set_return_logits(bool on) { return_logits_ = on; }
  bool returns_logits() const { return return_logits_; }
  // The loss from the hidden states [B*T, C], the head's weight and the labels [B*T], for a
  // strategy that holds only part of the head (tensor parallelism over the vocabulary: each
  // rank's logits are a slice of the vocabulary; FSDP's vocabulary-parallel head). Unset: the
  // model's own loss.
  using HeadLoss = std::function<Tensor(const Tensor& hidden, const Tensor& weight, const Tensor& labels)>;
  void set_head_loss(HeadLoss loss) { head_loss_ = std::move(loss); }
  // The logits from the hidden states [..., C] and the head's weight, for such a strategy (each
  // rank's logits a slice of the vocabulary, the hidden states' gradient summed over the
  // slices). Unset: hidden x weight^T.
  using HeadLogits = std::function<Tensor(const Tensor& hidden, const Tensor& weight)>;
  void set_head_logits(HeadLogits logits) { head_logits_ = std::move(logits); }

 protected:
  // Throws naming the model unless ids is an integer [B, T] with 1 <= T <= max_seq_len().
  void check_input_ids(const Tensor& ids) const;

 private:
  Tensor project(const Tensor& hidden);  // the logits, through head_logits_ when set

  bool return_logits_ = false;
  HeadLoss head_loss_;
  HeadLogits head_logits_;
};

}  // namespace acc::models
