// Where a sliced piece's elements lie in the whole tensor (whole_runs), against a plain
// element-by-element mapping, and how the manifest records slices.
#include <gtest/gtest.h>

#include "acc/checkpoint/layout.h"
#include "acc/checkpoint/manifest.h"
#include "acc/util/error.h"

namespace acc::checkpoint {
namespace {

using Slice = ShardedModel::DimSlice;

// The reference: element i of the flattened slice, unravelled in the slice's shape, its index
// along the slice's dim replaced by the blocks' i-th index, ravelled in the whole shape.
std::vector<int64_t> whole_index_of_each(const Shape& whole, const Slice& slice, int64_t begin, int64_t count) {
  std::vector<int64_t> along;
  for (const auto& [b, e] : slice.blocks)
    for (int64_t i = b; i < e; ++i) along.push_back(i);
  Shape local = whole;
  local[static_cast<size_t>(slice.dim)] = static_cast<int64_t>(along.size());
  std::vector<int64_t> out;
  for (int64_t i = begin; i < begin + count; ++i) {
    std::vector<int64_t> index(local.size());
    int64_t rest = i;
    for (size_t d = local.size(); d-- > 0;) {
      index[d] = rest % local[d];
      rest /= local[d];
    }
    index[static_cast<size_t>(slice.dim)] = along[static_cast<size_t>(index[static_cast<size_t>(slice.dim)])];
    int64_t flat = 0;
    for (size_t d = 0; d < whole.size(); ++d) flat = flat * whole[d] + index[d];
    out.push_back(flat);
  }
  return out;
}

using Run = ShardedModel::Run;
std::vector<int64_t> expand(const std::vector<Run>& runs, int64_t count) {
  std::vector<int64_t> out(static_cast<size_t>(count), -1);
  for (const Run& r : runs)
    for (int64_t k = 0; k < r.count; ++k) out[static_cast<size_t>(r.offset + k)] = r.whole_begin + k;
  return out;
}

TEST(WholeRuns, WithoutASliceIsTheRangeItself) {
  const auto runs = ShardedModel::whole_runs({6, 4}, std::nullopt, 5, 7);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].whole_begin, 5);
  EXPECT_EQ(runs[0].count, 7);
  EXPECT_EQ(runs[0].offset, 0);
}

// Worked by hand: rows 1 and 4 of a [6, 4] matrix (a packed tensor of 2 sections split over 3
// ranks, rank 1), elements 2..6 of that slice: row 1's last two, then row 4's first three.
TEST(WholeRuns, PackedRowsByHand) {
  const auto runs = ShardedModel::whole_runs({6, 4}, Slice{0, {{1, 2}, {4, 5}}}, 2, 5);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].whole_begin, 6);
  EXPECT_EQ(runs[0].count, 2);
  EXPECT_EQ(runs[0].offset, 0);
  EXPECT_EQ(runs[1].whole_begin, 16);
  EXPECT_EQ(runs[1].count, 3);
  EXPECT_EQ(runs[1].offset, 2);
}

TEST(WholeRuns, AdjacentRowsMergeIntoOneRun) {
  const auto runs = ShardedModel::whole_runs({6, 4}, Slice{0, {{2, 5}}}, 1, 10);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].whole_begin, 9);
  EXPECT_EQ(runs[0].count, 10);
}

TEST(WholeRuns, MatchTheElementwiseMappingForEverySliceAndRange) {
  const std::vector<std::pair<Shape, Slice>> cases = {
      {{7, 5}, Slice{0, {{2, 5}}}},                  // column-parallel rows
      {{7, 5}, Slice{1, {{1, 3}}}},                  // row-parallel columns
      {{9, 4}, Slice{0, {{0, 1}, {3, 4}, {6, 7}}}},  // q, k, v each split
      {{9, 4}, Slice{0, {{1, 1}, {4, 4}, {7, 7}}}},  // a rank with no rows
      {{3, 4, 5}, Slice{1, {{1, 3}}}},               // a middle dim
      {{11}, Slice{0, {{4, 9}}}},                    // a split bias
  };
  for (const auto& [whole, slice] : cases) {
    int64_t rows = 0;
    for (const auto& [b, e] : slice.blocks) rows += e - b;
    const int64_t local = shape_numel(whole) / whole[static_cast<size_t>(slice.dim)] * rows;
    for (int64_t begin = 0; begin <= local; ++begin)
      for (int64_t count = 0; begin + count <= local; ++count)
        ASSERT_EQ(expand(ShardedModel::whole_runs(whole, slice, begin, count), count),
                  whole_index_of_each(whole, slice, begin, count))
            << shape_str(whole) << " dim " << slice.dim << " [" << begin << ", +" << count << ")";
  }
}

Manifest with_piece(std::optional<Slice> slice) {
  Manifest m;
  m.model = "GPT2";
  m.strategy = "SPMD";
  m.state_dict_type = "SHARDED_STATE_DICT";
  m.files["shard-00000-of-00001.safetensors"] = 100;
  m.tensors["w"].shape = {6, 4};
  m.tensors["w"].pieces.push_back({"shard-00000-of-00001.safetensors", "w", 0, 8, 7, false, slice});
  return m;
}

TEST(ManifestSlices, RoundTripAndRaiseTheVersionOnlyWhenPresent) {
  const std::string plain = with_piece(std::nullopt).to_json();
  EXPECT_NE(plain.find("\"version\": 1"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("slice"), std::string::npos);

  const std::string sliced = with_piece(Slice{0, {{1, 2}, {4, 5}}}).to_json();
  EXPECT_NE(sliced.find("\"version\": 2"), std::string::npos) << sliced;
  const Manifest back = Manifest::parse(sliced, "test");
  EXPECT_EQ(back.version, 2);
  const auto& piece = back.tensors.at("w").pieces.at(0);
  ASSERT_TRUE(piece.slice.has_value());
  EXPECT_EQ(piece.slice->dim, 0);
  EXPECT_EQ(piece.slice->blocks, (std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {4, 5}}));
  EXPECT_EQ(back.to_json(), sliced);
}

TEST(ManifestSlices, BadBlocksAreErrorsNamingThePiece) {
  const std::string overlapping = with_piece(Slice{0, {{1, 3}, {2, 5}}}).to_json();
  try {
    Manifest::parse(overlapping, "manifest.json");
    FAIL() << "overlapping blocks were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("manifest.json.tensors.w.pieces[0].slice.blocks[1]"),
              std::string::npos) << e.what();
  }
  const std::string outside = with_piece(Slice{1, {{0, 5}}}).to_json();
  EXPECT_THROW(Manifest::parse(outside, "manifest.json"), Error);
  const std::string bad_dim = with_piece(Slice{2, {{0, 1}}}).to_json();
  EXPECT_THROW(Manifest::parse(bad_dim, "manifest.json"), Error);
  // The piece holds elements [0, 8): more than a slice of one row of 4.
  const std::string past_the_slice = with_piece(Slice{0, {{1, 2}}}).to_json();
  EXPECT_THROW(Manifest::parse(past_the_slice, "manifest.json"), Error);
}

// A manifest with every field set: optimizer, scheduler, config, several files, an optimizer
// tensor with its step and a weight stored transposed.
Manifest every_field() {
  Manifest m = with_piece(std::nullopt);
  m.world_size = 2;
  m.position = {7, 1, 3};
  m.optimizer = "AdamW";
  m.optimizer_steps = 7;
  m.optimizer_state_names = {"exp_avg", "exp_avg_sq"};
  m.scheduler_step = 7;
  m.config_yaml = "mixed_precision: bf16\n";
  m.files["model.safetensors"] = 4096;
  TensorRecord& t = m.tensors["c_fc.weight"];
  t.shape = {8, 4};
  t.hf_transposed = true;
  t.pieces.push_back({"model.safetensors", "c_fc.weight", 0, 32, 4294967295u, true});
  TensorRecord& state = m.tensors[optimizer_key("exp_avg", "c_fc.weight")];
  state.shape = {8, 4};
  state.step = 7;
  for (int r = 0; r < 2; ++r)
    state.pieces.push_back({shard_file_name(r, 2), optimizer_key("exp_avg", "c_fc.weight"), 16 * r, 16, 1, false});
  return m;
}

TEST(ManifestParse, EveryFieldRoundTrips) {
  const std::string text = every_field().to_json();
  const Manifest back = Manifest::parse(text, "manifest.json");
  EXPECT_EQ(back.to_json(), text);
  EXPECT_EQ(back.position.batch, 3);
  EXPECT_EQ(back.optimizer_state_names, (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  EXPECT_EQ(back.scheduler_step, 7);
  EXPECT_EQ(back.files.at("model.safetensors"), 4096u);
  const auto& weight = back.tensors.at("c_fc.weight");
  EXPECT_TRUE(weight.hf_transposed);
  EXPECT_TRUE(weight.pieces.at(0).transposed);
  EXPECT_EQ(weight.pieces.at(0).crc32, 4294967295u);
  EXPECT_EQ(back.tensors.at(optimizer_key("exp_avg", "c_fc.weight")).pieces.at(1).begin, 16);
}

// Each field made wrong in the text: the error names it and what was expected.
TEST(ManifestParse, AWrongFieldIsNamed) {
  const std::string text = every_field().to_json();
  auto replaced = [&](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? text : std::string(text).replace(at, from.size(), to);
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {replaced("\"world_size\": 2", "\"world_size\": \"two\""), "manifest.json.world_size must be an integer"},
      {replaced("\"model\": \"GPT2\",", ""), "manifest.json: the field \"model\" is missing"},
      {replaced("\"batch\": 3", "\"batch\": -3"), "manifest.json.position.batch is -3, expected at least 0"},
      {replaced("\"model.safetensors\": 4096", "\"model.safetensors\": -1"),
       "manifest.json.files.model.safetensors must be a non-negative integer"},
      {replaced("\"transposed\": true", "\"transposed\": 1"),
       "manifest.json.tensors.c_fc.weight.pieces[0].transposed must be true or false"},
      {replaced("\"shape\": [\n    8", "\"shape\": [\n    -8"), "manifest.json.tensors.c_fc.weight.shape[0]"},
      {replaced("\"pieces\": [", "\"pieces\": [1, "), "manifest.json.tensors.c_fc.weight.pieces[0] must be an object"},
      {replaced("\"exp_avg_sq\"", "2"), "manifest.json.optimizer.state_names must hold strings"},
      {replaced("\"tensors\": {", "\"tensors\": [") , "manifest.json: invalid JSON"},
      {replaced("\"crc32\": 4294967295", "\"crc32\": 4294967296"),
       "manifest.json.tensors.c_fc.weight.pieces[0].crc32 is 4294967296, expected at most 4294967295"},
      {replaced("\"version\": 1", "\"version\": 18446744073709551615"),
       "manifest.json.version must be an integer that fits in 64 bits"},
      {replaced("\"tensors\": {", "\"tensors\": {\n  \"x\": 1,"), "manifest.json.tensors.x must be an object"},
      {replaced("\"files\": {", "\"files\": {\n  \"model.safetensors\": 1,"),
       "manifest.json.files.model.safetensors is given twice"},
      {"[" + text + "]", "manifest.json: not a JSON object"},
  };
  for (const auto& [bad, expected] : cases) {
    try {
      Manifest::parse(bad, "manifest.json");
      ADD_FAILURE() << "accepted; expected: " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace acc::checkpoint
