#pragma once
// The public API in one header: what a training program needs.
//   acc::Session          ranks, threads, logging, plugins       (runtime/init.h)
//   acc::Config           accelerate-format configuration        (config/config.h)
//   acc::accelerate()     the model and loader, spread over ranks (accelerate/accelerate.h)
//   acc::Accelerator      the same in Hugging Face accelerate's style (accelerate/accelerator.h)
//   acc::models, acc::data, acc::optim, acc::nn, acc::ops          models, data, optimizers
#include "acc/accelerate/accelerate.h"
#include "acc/accelerate/accelerator.h"
#include "acc/strategy/sharded_model.h"
#include "acc/checkpoint/checkpoint.h"
#include "acc/config/config.h"
#include "acc/data/dataloader.h"
#include "acc/data/dataset.h"
#include "acc/data/idx.h"
#include "acc/data/token_file.h"
#include "acc/models/classifiers.h"
#include "acc/models/gpt2.h"
#include "acc/models/llama.h"
#include "acc/models/model.h"
#include "acc/nn/nn.h"
#include "acc/ops/ops.h"
#include "acc/optim/optim.h"
#include "acc/runtime/init.h"
#include "acc/tensor/tensor.h"
