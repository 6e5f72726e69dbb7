#pragma once
// Gradients of lookup tables as rows. The gradient of a [V, C] table that a batch looked up a
// few rows of (an embedding) is, dense, a zeroed [V, C] tensor holding those rows, and whoever
// sums it (a pipeline stage adding each microbatch's gradients) passes over all of it again.
// A caller that sums a table's gradient itself may instead open a RowGradients scope: while it
// lives on this thread, the backward of ops::embedding over a table the scope knows adds the
// looked-up rows' gradients straight into the f32 [V, C] sum the scope gives for it, and the
// table gets no gradient of its own from that lookup.
#include <functional>

#include "acc/tensor/tensor.h"

namespace acc::autograd {

class RowGradients {
 public:
  // The f32 [V, C] sum to add the rows of the table `table` (Tensor::impl(): the very tensor
  // looked up, not a copy) into, made on first use as the caller likes, or an undefined tensor
  // when the scope does not sum that table.
  using SumOf = std::function<Tensor(const TensorImpl* table)>;
  explicit RowGradients(SumOf sum_of);
  ~RowGradients();
  RowGradients(const RowGradients&) = delete;
  RowGradients& operator=(const RowGradients&) = delete;

  // What the innermost live scope on this thread sums the rows of `table` (of shape `shape`)
  // into; undefined when none does (the lookup's backward then gives the table a dense
  // gradient). A sum that is not f32 of the table's shape is an error.
  static Tensor sum_for(const TensorImpl* table, const Shape& shape);

 private:
  SumOf sum_of_;
  RowGradients* outer_;
};

}  // namespace acc::autograd
