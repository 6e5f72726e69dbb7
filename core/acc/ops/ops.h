#pragma once
// All differentiable ops of acc (namespace acc::ops).
#include "acc/ops/activation.h"
#include "acc/ops/attention.h"
#include "acc/ops/conv.h"
#include "acc/ops/elementwise.h"
#include "acc/ops/embedding.h"
#include "acc/ops/loss.h"
#include "acc/ops/matmul.h"
#include "acc/ops/norm.h"
#include "acc/ops/reduce.h"
#include "acc/ops/shape.h"
