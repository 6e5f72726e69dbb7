// acc::Mesh over the world: row-major coordinates, one process group per axis, and the errors
// of a mesh that does not fit the job.
#include <gtest/gtest.h>

#include "acc/runtime/init.h"
#include "acc/distributed/mesh.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

TEST(Mesh, AxisGroupsHoldTheRanksAlongEachAxis) {
  auto world = world_ptr();
  const int n = world->size();
  for (const auto& shape : std::vector<std::vector<int>>{{n, 1}, {1, n}, {n / 2, 2}}) {
    const Mesh mesh(world, shape, {"fsdp", "model"});
    const int rows = shape[0], cols = shape[1];
    EXPECT_EQ(mesh.coordinates(), (std::vector<int>{world->rank() / cols, world->rank() % cols}));
    EXPECT_EQ(mesh.group("fsdp")->size(), rows);
    EXPECT_EQ(mesh.group("model")->size(), cols);
    EXPECT_EQ(mesh.group("fsdp")->rank(), mesh.coordinate("fsdp"));
    EXPECT_EQ(mesh.group("model")->rank(), mesh.coordinate("model"));
    // Summing world ranks along an axis adds exactly the ranks of this row or column.
    Tensor along_fsdp = Tensor::full({1}, world->rank()), along_model = Tensor::full({1}, world->rank());
    mesh.group("fsdp")->all_reduce(along_fsdp);
    mesh.group("model")->all_reduce(along_model);
    int fsdp_sum = 0, model_sum = 0;
    for (int r = 0; r < rows; ++r) fsdp_sum += r * cols + mesh.coordinate("model");
    for (int c = 0; c < cols; ++c) model_sum += mesh.coordinate("fsdp") * cols + c;
    EXPECT_EQ(along_fsdp.item(), fsdp_sum) << mesh.describe();
    EXPECT_EQ(along_model.item(), model_sum) << mesh.describe();
  }
}

TEST(Mesh, ShapesAndNamesThatDoNotFitAreErrors) {
  auto world = world_ptr();
  const int n = world->size();
  EXPECT_NE(error_of([&] { Mesh(world, {n, 2}, {"fsdp", "model"}); }).find("holds " + std::to_string(2 * n) + " ranks but"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Mesh(world, {n, 1}, {"fsdp"}); }).find("give one name per axis"), std::string::npos);
  EXPECT_NE(error_of([&] { Mesh(world, {n, 1}, {"fsdp", "fsdp"}); }).find("axis name 'fsdp' appears twice"),
            std::string::npos);
  const Mesh mesh(world, {n}, {"fsdp"});
  EXPECT_NE(error_of([&] { mesh.group("model"); }).find("mesh (" + std::to_string(n) + ") over axes (fsdp) has no axis 'model'"),
            std::string::npos);
}

}  // namespace
}  // namespace acc::test
