// Which samples each rank sees: the ranks of one `model` group the same, the fsdp ranks
// different slices of every global batch.
#include <gtest/gtest.h>

#include "spmd_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

TEST(SpmdData, ModelGroupsShareSamplesFsdpRanksSplitThem) {
  const std::vector<int> mesh = fsdp_tp_mesh();
  data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 4, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(make_model("gpt2"), loader, spmd_config("gpt2", mesh));
  const Tensor ids = (*rank_loader.begin())["input_ids"];
  EXPECT_EQ(ids.size(0), 4 / mesh[0]) << "each fsdp rank takes its slice of the global batch";
  Tensor all = Tensor::empty({ids.numel() * world().size()}, ids.dtype());
  world().all_gather(ids.view({ids.numel()}), all);
  const auto first = [&](int rank) { return all.slice_flat(rank * ids.numel(), {ids.numel()}).to_vector(); };
  for (int r = 0; r < world().size(); ++r) {
    const int fsdp = r / mesh[1];  // row-major (fsdp, model)
    if (r % mesh[1] != 0) {
      EXPECT_EQ(first(r), first(fsdp * mesh[1])) << "rank " << r;
    }
    if (fsdp > 0) {
      EXPECT_NE(first(r), first(r - mesh[1])) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace acc::test
