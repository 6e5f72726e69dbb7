#pragma once
// Optimizers, schedules and gradient clipping (namespace acc::optim).
#include "acc/optim/adamw.h"
#include "acc/optim/clip_grad.h"
#include "acc/optim/lr_schedule.h"
#include "acc/optim/optimizer.h"
#include "acc/optim/sgd.h"
