#include "acc/autograd/row_gradients.h"

#include "acc/util/error.h"
#include "acc/util/strings.h"

namespace acc::autograd {
namespace {
thread_local RowGradients* innermost = nullptr;
}  // namespace

RowGradients::RowGradients(SumOf sum_of) : sum_of_(std::move(sum_of)), outer_(innermost) { innermost = this; }

RowGradients::~RowGradients() { innermost = outer_; }

Tensor RowGradients::sum_for(const TensorImpl* table, const Shape& shape) {
  if (!innermost) return Tensor();
  Tensor sum = innermost->sum_of_(table);
  ACC_CHECK(!sum.defined() || (sum.dtype() == DType::f32 && sum.shape() == shape),
            "RowGradients: the rows' sum must be f32 [", util::join(shape), "], got ", sum.describe());
  return sum;
}

}  // namespace acc::autograd
