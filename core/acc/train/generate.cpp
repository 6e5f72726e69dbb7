#include "acc/train/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "acc/autograd/grad_mode.h"
#include "acc/tensor/random.h"

namespace acc::train {

int32_t sample_token(const float* logits, int64_t vocab, double temperature, int64_t top_k,
                     double u) {
  ACC_CHECK(vocab > 0, "sample_token: empty vocabulary");
  if (temperature <= 0) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = top_k > 0 ? std::min(top_k, vocab) : vocab;
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  std::vector<double> weights(static_cast<size_t>(k));
  double total = 0;
  for (int64_t i = 0; i < k; ++i) {
    weights[i] = std::exp((logits[order[i]] - logits[order[0]]) / temperature);  // max first: no overflow
    total += weights[i];
  }
  double target = u * total;
  for (int64_t i = 0; i < k; ++i) {
    target -= weights[i];
    if (target < 0) return order[i];
  }
  return order[k - 1];
}

std::vector<int32_t> generate(models::CausalLM& model, std::vector<int32_t> prompt,
                              const SampleOptions& options) {
  ACC_CHECK(!prompt.empty(), "generate: the prompt must hold at least one token");
  autograd::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const uint64_t key = random::stream_key(options.seed, "generate");
  const int64_t vocab = model.vocab_size();
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    const int64_t T = std::min<int64_t>(static_cast<int64_t>(prompt.size()), model.max_seq_len());
    std::vector<int32_t> window(prompt.end() - T, prompt.end());
    Tensor logits = model.logits(Tensor::from_vector_i32(window, {1, T}));
    const float* last = logits.data<float>() + (T - 1) * vocab;
    prompt.push_back(sample_token(last, vocab, options.temperature, options.top_k,
                                  random::uniform(key, static_cast<uint64_t>(i))));
  }
  model.train(was_training);
  return prompt;
}

}  // namespace acc::train
