#include "output_rules.h"

#include <map>
#include <optional>

#include "acc/util/error.h"
#include "common/axis_names.h"

namespace acc::spmd {

namespace {

std::map<std::string, nn::Module*> modules_by_path(models::Model& model) {
  std::map<std::string, nn::Module*> modules;
  for (auto& [path, m] : model.named_modules()) modules[path] = m;
  return modules;
}

[[noreturn]] void fail_rule(const ShardingRule& rule, const nn::Module& m, const std::string& path,
                            const std::string& why) {
  ACC_FAIL("SPMD: ", rule.key, ": ", rule.spec.to_string(), " for the output of ", m.type_name(), " '", path, "' ",
           why);
}

}  // namespace

void check_output_rules(const ResolvedSharding& sharding, models::Model& model,
                        const parallel::TensorParallel& tensor_parallel, const Mesh& mesh) {
  const auto modules = modules_by_path(model);
  const bool model_axis = mesh.has_axis(parallel::kModelAxis) && mesh.size(parallel::kModelAxis) > 1;
  const parallel::SplitLayers* split = tensor_parallel.split_layers();
  for (const auto& [path, rule] : sharding.outputs) {
    const nn::Module* m = modules.at(path);
    auto fail = [&](const std::string& why) { fail_rule(rule, *m, path, why); };
    if (rule.output_index > 0)
      fail("selects element " + std::to_string(rule.output_index) + " of a tuple, but acc's modules return one "
           "tensor: [0] is that tensor");
    const auto& dims = rule.spec.dims;
    if (dims.empty()) continue;
    if (dims[0] != std::vector<std::string>{parallel::kFsdpAxis})
      fail("must split dim 0 (the batch) over fsdp: SPMD is data parallel over that axis");
    const bool hidden_inside = model_axis && split && split->split() == parallel::SplitDim::hidden && split->contains(m);
    if (hidden_inside && dims.back() != std::vector<std::string>{parallel::kModelAxis})
      fail("must split the last dim over `model`: inside the layers whose outputs the rules split on the hidden "
           "dim, every module's output is split so");
    for (size_t d = 1; d < dims.size(); ++d) {
      if (dims[d].empty()) continue;
      const bool over_model = dims[d] == std::vector<std::string>{parallel::kModelAxis};
      const bool sequence = d == 1 && dims.size() >= 3, last = d + 1 == dims.size();
      if (!over_model || !(sequence || last))
        fail("is not supported: past the batch only the sequence (dim 1) or the last dim may be split, over `model`");
      if (sequence || !model_axis) continue;  // sequence: parallel::SplitLayers::plan checked the layers
      if (!tensor_parallel.splits_output(m) && !hidden_inside)
        fail("splits the last dim over `model`, which only a column-parallel Linear's output is, or the output of a "
             "stack's layers (and of every module in them) where the rules split the layers on the hidden dim");
    }
  }
}

std::vector<autograd::HookHandle> check_outputs_at_calls(const ResolvedSharding& sharding, models::Model& model,
                                                         const parallel::SplitLayers* split) {
  const auto modules = modules_by_path(model);
  if (split && split->split() != parallel::SplitDim::sequence) split = nullptr;
  std::vector<autograd::HookHandle> checks;
  for (const auto& [path, rule] : sharding.outputs)
    checks.push_back(modules.at(path)->add_call_wrapper(
        [path = path, rule = rule, split](nn::Module& m, const Tensor& x, const nn::Module::Inner& inner) {
          Tensor y = inner(x);
          auto fail = [&](const std::string& why) { fail_rule(rule, m, path, why); };
          if (y.dim() != static_cast<int64_t>(rule.spec.rank()))
            fail("has " + std::to_string(rule.spec.rank()) + " entries, but the output is " + y.describe() +
                 ": a spec names one mesh axis or null per dimension");
          if (!split || !split->contains(&m) || split->is_layer(&m)) return y;
          const std::optional<bool> sliced = split->holds_slice(y);  // only for outputs of 3 or more dims
          if (!sliced) return y;
          const bool says_sliced = rule.spec.dims[1] == std::vector<std::string>{parallel::kModelAxis};
          if (*sliced != says_sliced)
            fail(std::string("says its sequence (dim 1) is ") + (says_sliced ? "split over `model`" : "whole") +
                 ", but in a layer whose sequence is split it " +
                 (*sliced ? "holds this rank's tokens: [fsdp, model, ...]" : "holds every token: [fsdp, null, ...]") +
                 " (" + y.describe() + ")");
          return y;
        }));
  return checks;
}

}  // namespace acc::spmd
