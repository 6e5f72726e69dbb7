// SPMD's parameter pieces say how they lie along the mesh: sharded along `fsdp` (or whole over
// it, for parameters the rules keep off that axis), and along `model` split (the parameters
// the fsdp-tp rules split, with the slice they hold) or replicated (the rest); copies() is the
// product of the replicated axes' ranks. The fsdp-tp rules on (1, 1), (1, 2) or (2, 2). The
// pieces alone assemble the whole model.
#include <gtest/gtest.h>

#include "spmd_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

TEST(SpmdPlacement, PiecesAreShardedOnFsdpAndSplitOrReplicatedOnModel) {
  using Kind = ShardedModel::Placement::Kind;
  const std::vector<int> mesh = fsdp_tp_mesh();
  data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 8, .prefetch = 0});
  auto sharded = accelerate(make_model("gpt2"), loader, fsdp_tp_config("gpt2")).model;
  int split = 0, replicated = 0;
  for (const auto& piece : sharded->parameter_pieces()) {
    SCOPED_TRACE(piece.name);
    ASSERT_EQ(piece.placements.size(), 2u);
    EXPECT_EQ(piece.placements[0].axis, "fsdp");
    EXPECT_NE(piece.placements[0].kind, Kind::split);  // sharded, or whole over fsdp
    EXPECT_EQ(piece.placements[0].ranks, mesh[0]);
    const int fsdp_copies = piece.placements[0].kind == Kind::replicated ? mesh[0] : 1;
    EXPECT_EQ(piece.placements[1].axis, "model");
    EXPECT_EQ(piece.placements[1].ranks, mesh[1]);
    const bool is_split = piece.placements[1].kind == Kind::split;
    EXPECT_EQ(is_split, piece.slice.has_value() && mesh[1] > 1);
    EXPECT_EQ(piece.copies(), fsdp_copies * (is_split ? 1 : mesh[1]));
    (is_split ? split : replicated) += 1;
  }
  EXPECT_GT(replicated, 0);  // norms and biases of row-parallel layers stay whole over model
  if (mesh[1] > 1) {
    EXPECT_GT(split, 0);
  }
}

// ShardedModel's own full_parameters(), from the pieces alone, places split slices (GPT-2's
// packed c_attn among them) where SPMD's own gathers and joins put them: exactly.
TEST(SpmdPlacement, PiecesAssembleTheFullParameters) {
  data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 8, .prefetch = 0});
  auto sharded = accelerate(make_model("gpt2", 3), loader, fsdp_tp_config("gpt2")).model;
  expect_same_parameters(sharded->ShardedModel::full_parameters(), sharded->full_parameters());
}

}  // namespace
}  // namespace acc::test
