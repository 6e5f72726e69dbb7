#pragma once
// The autograd layer of acc (namespace acc::autograd): grad mode, the engine, hooks, custom
// functions and checkpointing. Tensor::backward/grad/register_hook are declared in tensor.h.
#include "acc/autograd/engine.h"
#include "acc/autograd/function.h"
#include "acc/autograd/grad_mode.h"
#include "acc/autograd/hooks.h"
#include "acc/autograd/node.h"
#include "acc/autograd/split_grad.h"
