// Each parameter piece says how it lies along the strategy's mesh axes, and the gradient norm
// counts it by what that says: FSDP's pieces are sharded along `shard` and replicated along
// `replicate`; the ignored modules' are replicated along both, so every rank holds them. The
// pieces alone assemble the whole model.
#include <gtest/gtest.h>

#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

TEST(Placement, FsdpPiecesNameTheirAxesAndCopies) {
  using Kind = ShardedModel::Placement::Kind;
  const int n = world().size();
  for (const std::string strategy : {"FULL_SHARD", "NO_SHARD", "HYBRID_SHARD"}) {
    SCOPED_TRACE(strategy);
    Config config = strategy_config(strategy, "gpt2");
    config.dist.fsdp.ignored_modules = {"transformer.wpe"};
    data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 8, .prefetch = 0});
    auto sharded = accelerate(make_model("gpt2"), loader, config).model;
    const int shard = strategy == "NO_SHARD" ? 1 : strategy == "HYBRID_SHARD" ? topology().local_size : n;
    const auto pieces = sharded->parameter_pieces();
    ASSERT_FALSE(pieces.empty());
    for (const auto& piece : pieces) {
      SCOPED_TRACE(piece.name);
      const bool ignored = piece.name.starts_with("transformer.wpe.");
      ASSERT_EQ(piece.placements.size(), 2u);
      EXPECT_EQ(piece.placements[0].axis, "replicate");
      EXPECT_EQ(piece.placements[0].kind, Kind::replicated);
      EXPECT_EQ(piece.placements[0].ranks, n / shard);
      EXPECT_EQ(piece.placements[1].axis, "shard");
      EXPECT_EQ(piece.placements[1].kind, ignored ? Kind::replicated : Kind::sharded);
      EXPECT_EQ(piece.placements[1].ranks, shard);
      EXPECT_EQ(piece.copies(), ignored ? n : n / shard);
    }
  }
}

// ShardedModel's own full_parameters(), which any strategy reporting its pieces gets, places
// every piece where FSDP's unit gathers put it: the same values, exactly.
TEST(Placement, PiecesAssembleTheFullParameters) {
  for (const std::string strategy : {"FULL_SHARD", "NO_SHARD", "HYBRID_SHARD"}) {
    SCOPED_TRACE(strategy);
    Config config = strategy_config(strategy, "gpt2");
    config.dist.fsdp.ignored_modules = {"transformer.wpe"};
    data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 8, .prefetch = 0});
    auto sharded = accelerate(make_model("gpt2", 3), loader, config).model;
    expect_same_parameters(sharded->ShardedModel::full_parameters(), sharded->full_parameters());
  }
}

}  // namespace
}  // namespace acc::test
