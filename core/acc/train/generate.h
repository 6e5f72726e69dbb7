#pragma once
// Text generation from a causal language model: repeated forward passes over the last
// max_seq_len() tokens (no key/value cache: this is for a sample at the end of training, not
// for serving), sampling each next token with temperature and top-k.
#include <cstdint>
#include <vector>

#include "acc/models/model.h"

namespace acc::train {

struct SampleOptions {
  int64_t max_new_tokens = 64;
  double temperature = 1.0;  // 0: greedy (argmax)
  int64_t top_k = 40;        // 0: the whole vocabulary
  uint64_t seed = 0;         // the draws are keyed by (seed, position): reproducible
};

// The prompt (non-empty) followed by the generated tokens. Runs in eval mode without grad and
// restores the model's training mode.
std::vector<int32_t> generate(models::CausalLM& model, std::vector<int32_t> prompt,
                              const SampleOptions& options = {});

// The index drawn from softmax(logits / temperature) restricted to the top_k largest, using
// the uniform number u in [0, 1).
int32_t sample_token(const float* logits, int64_t vocab, double temperature, int64_t top_k,
                     double u);

}  // namespace acc::train
