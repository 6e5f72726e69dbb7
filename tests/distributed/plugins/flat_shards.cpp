// A strategy plugin that keeps, on each rank, one contiguous range of every parameter's
// flattened elements (FSDP's flat shards without its units), and an empty tensor in the
// model's place. It only reports its pieces and their placement, and so shows what the strategy
// contract's defaults build from that alone: full_parameters(), summon_full_params() and the
// gradient norm. It does not train: forward is refused.
#include <algorithm>
#include <memory>
#include <stdexcept>

#include "acc/plugin/plugin_api.h"
#include "acc/plugin/registry.h"
#include "acc/strategy/strategy.h"

namespace {

using acc::Tensor;

class FlatShards : public acc::ShardedModel {
 public:
  FlatShards(std::shared_ptr<acc::models::Model> m, std::shared_ptr<acc::dist::ProcessGroup> world)
      : ShardedModel("FlatShards", std::move(m)), world_(std::move(world)) {
    const int64_t ranks = world_->size(), rank = world_->rank();
    for (const auto& [name, p] : module().named_parameters()) {
      const int64_t n = p.numel(), per_rank = (n + ranks - 1) / ranks;
      const int64_t begin = std::min(n, rank * per_rank), end = std::min(n, begin + per_rank);
      Tensor shard = p.slice_flat(begin, {end - begin}).clone();
      shard.set_requires_grad(true);
      pieces_.push_back({.name = name, .shape = p.shape(), .begin = begin, .master = shard,
                         .placements = {{"shard", Placement::Kind::sharded, world_->size()}}});
      module().replace_parameter(name, Tensor::zeros({0}));
    }
  }
  acc::models::ModelOutput forward(const acc::data::Batch&) override {
    throw std::runtime_error("the flat_shards test strategy does not train");
  }
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const auto& piece : pieces_) out.emplace_back(piece.name, piece.master);
    return out;
  }
  std::vector<acc::optim::ParamGroup> param_groups(double weight_decay) const override {
    return {acc::optim::ParamGroup{.params = parameters(), .weight_decay = weight_decay}};
  }
  std::shared_ptr<acc::dist::ProcessGroup> gradient_norm_group() const override { return world_; }
  std::vector<std::pair<std::string, acc::Shape>> whole_parameter_shapes() const override {
    std::vector<std::pair<std::string, acc::Shape>> out;
    for (const auto& piece : pieces_) out.emplace_back(piece.name, piece.shape);
    return out;
  }
  std::vector<ParameterPiece> parameter_pieces() const override { return pieces_; }

 private:
  std::shared_ptr<acc::dist::ProcessGroup> world_;
  std::vector<ParameterPiece> pieces_;
};

class FlatShardsStrategy : public acc::Strategy {
 public:
  std::string name() const override { return "third_party_flat_shards"; }
  std::shared_ptr<acc::ShardedModel> wrap(std::shared_ptr<acc::models::Model> model) override {
    return std::make_shared<FlatShards>(std::move(model), world());
  }
};

void register_flat_shards(acc::plugin::Registry& registry) {
  registry.add_strategy("third_party_flat_shards", [] { return std::make_unique<FlatShardsStrategy>(); });
}

}  // namespace

ACC_PLUGIN("flat_shards", register_flat_shards)
