#pragma once
// The body of train_gpt2 and train_llama (they differ only in the model they build): the seed
// workflow of the design — token files, AdamW with warmup + cosine, gradient clipping, f32 or
// bf16 compute, a progress bar, periodic validation loss, tokens/s and MFU, a generated sample,
// --init-from / --save safetensors files. Run a program with --help for the options.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "acc/config/config.h"
#include "acc/models/model.h"

namespace acc::train {

// Builds the model from --config (a preset name or a YAML path) and the init seed.
using CausalLMFactory =
    std::function<std::shared_ptr<models::CausalLM>(const std::string& config, uint64_t seed)>;

// Parses the options, trains, and returns the exit code. Any error (missing data, bad option,
// bad file) is one "program: error: ..." message on stderr and exit code 1, before anything is
// written.
// With no wrap policy in the config, the model's blocks (Structure::block_types) are wrapped.
int lm_main(int argc, char** argv, const std::string& program, const CausalLMFactory& make_model);

// `config` as the training programs run it: with what the strategy's section changes for a
// model that declares its blocks (OptionSection::program_defaults; FSDP: with no wrap policy
// chosen at all, the blocks are wrapped; a policy the config chose is kept).
Config with_program_defaults(Config config);

// Entropy of the token frequency distribution, in nats: the loss of the best model that ignores
// context, which a trained language model must beat.
double unigram_entropy(std::span<const int32_t> tokens);

// Loss on `score` of the unigram model fitted on `fit` with add-one smoothing over the
// vocabulary: what a context-free model reaches on held-out text, the val loss to beat.
double unigram_cross_entropy(std::span<const int32_t> fit, std::span<const int32_t> score,
                             int64_t vocab_size);

// "val loss 6.8038 (unigram 7.4159, 0.61 nats below)": the validation loss beside the unigram
// model's, and by how much it beats it ("above" when it does not).
std::string describe_val_loss(double val, double unigram);

}  // namespace acc::train
