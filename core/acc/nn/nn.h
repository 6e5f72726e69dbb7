#pragma once
// The module layer of acc (namespace acc::nn).
#include "acc/nn/containers.h"
#include "acc/nn/deferred_init.h"
#include "acc/nn/init.h"
#include "acc/nn/layers.h"
#include "acc/nn/module.h"
