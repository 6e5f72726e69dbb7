// Lookup tables' gradients as rows (autograd/row_gradients.h): inside a RowGradients scope an
// embedding's backward adds the looked-up rows into the sum the scope gives, bit for bit what
// the dense gradient holds, and the table gets none of its own; other tables, and lookups
// outside any scope, get the dense gradient as before.
#include <gtest/gtest.h>

#include "acc/autograd/engine.h"
#include "acc/autograd/row_gradients.h"
#include "acc/ops/elementwise.h"
#include "acc/ops/embedding.h"
#include "acc/ops/reduce.h"

namespace acc {
namespace {

TEST(RowGradients, EmbeddingRowsGoIntoTheScopesSum) {
  Tensor table = Tensor::randn({10, 4}, 1, "table"), other = Tensor::randn({10, 4}, 2, "other"),
         scale = Tensor::randn({6, 4}, 3, "scale");
  for (Tensor* t : {&table, &other, &scale}) t->set_requires_grad(true);
  const Tensor ids = Tensor::from_vector_i32({1, 3, 3, 0, 9, 3}, {6});  // 3 three times
  // Both tables looked up; a weight after the lookups, so the rows' gradients differ.
  auto loss = [&] {
    return ops::sum(ops::mul(ops::add(ops::embedding(table, ids), ops::embedding(other, ids)), scale));
  };
  const std::vector<Tensor> dense = autograd::grad(loss(), Tensor(), {table, other, scale});

  Tensor sum = Tensor::zeros({10, 4});
  std::vector<Tensor> got;
  {
    const autograd::RowGradients rows([&](const TensorImpl* t) { return t == table.impl().get() ? sum : Tensor(); });
    got = autograd::grad(loss(), Tensor(), {table, other, scale});
    EXPECT_FALSE(got[0].defined()) << "the table summed by the scope got a gradient of its own";
    EXPECT_EQ(got[1].to_vector(), dense[1].to_vector()) << "a table the scope does not sum";
    EXPECT_EQ(got[2].to_vector(), dense[2].to_vector());
    EXPECT_EQ(sum.to_vector(), dense[0].to_vector());
    // A second backward (the next microbatch) adds to the sum.
    autograd::grad(loss(), Tensor(), {table});
    const std::vector<float> once = dense[0].to_vector(), twice = sum.to_vector();
    for (size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(twice[i], 2 * once[i], 1e-5f) << i;
  }

  // Out of the scope, the dense gradient again.
  EXPECT_EQ(autograd::grad(loss(), Tensor(), {table})[0].to_vector(), dense[0].to_vector());
  // A sum of the wrong shape is an error naming what was expected.
  Tensor wrong = Tensor::zeros({10, 5});
  const autograd::RowGradients rows([&](const TensorImpl*) { return wrong; });
  try {
    autograd::grad(loss(), Tensor(), {table});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the rows' sum must be f32 [10, 4]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace acc
