#include "acc/models/checkpoint.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "acc/autograd/grad_mode.h"
#include "acc/io/safetensors.h"
#include "acc/nn/deferred_init.h"
#include "acc/ops/ops.h"

namespace acc::models {

namespace {

Shape file_shape(const Model& model, const std::string& name, const Shape& shape) {
  return model.stored_transposed(name) ? Shape(shape.rbegin(), shape.rend()) : shape;
}

struct Plan {
  LoadProblems problems;
  std::map<std::string, std::string> file_name_of;  // parameter -> file entry
};

Plan plan_load(const Model& model, const io::SafetensorsReader& reader) {
  Plan plan;
  std::map<std::string, Shape> params;
  for (const auto& [name, p] : model.named_parameters()) params[name] = p.shape();
  for (const auto& entry : reader.entries()) {
    if (model.ignored_in_file(entry.name)) continue;
    const std::string name = model.name_from_file(entry.name);
    auto it = params.find(name);
    if (it == params.end() || plan.file_name_of.count(name)) {
      plan.problems.unexpected.push_back(entry.name);
      continue;
    }
    const Shape expected = file_shape(model, name, it->second);
    const bool floating = entry.dtype == DType::f32 || entry.dtype == DType::bf16;
    if (entry.shape != expected || !floating) {
      plan.problems.mismatched.push_back(
          entry.name + ": file " + std::string(dtype_name(entry.dtype)) + shape_str(entry.shape) +
          ", model expects f32/bf16" + shape_str(expected) +
          (model.stored_transposed(name) ? " (Conv1D layout [in, out])" : ""));
    }
    plan.file_name_of[name] = entry.name;
  }
  for (const auto& [name, shape] : params)
    if (!plan.file_name_of.count(name)) plan.problems.missing.push_back(name);
  return plan;
}

}  // namespace

std::string LoadProblems::describe(std::string_view source) const {
  std::ostringstream os;
  // A file of another model would list every tensor: the first few of each kind say enough.
  static constexpr size_t kShown = 8;
  auto list = [&os](const std::string& what, const std::vector<std::string>& names) {
    if (names.empty()) return;
    os << "\n  " << names.size() << " " << what << ":";
    for (size_t i = 0; i < std::min(names.size(), kShown); ++i) os << "\n    " << names[i];
    if (names.size() > kShown) os << "\n    ... and " << names.size() - kShown << " more";
  };
  list("missing from " + std::string(source), missing);
  list("unexpected in " + std::string(source), unexpected);
  list("with a wrong shape or dtype", mismatched);
  return os.str();
}

void save_model(const Model& model, const std::filesystem::path& path) {
  autograd::NoGradGuard no_grad;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, p] : model.named_parameters())
    tensors.emplace_back(name, model.stored_transposed(name) ? ops::transpose(p) : p.detach());
  // transformers refuses safetensors files whose metadata lacks a known "format".
  io::save_safetensors(path, tensors, {{"format", "pt"}});
}

LoadProblems check_model_file(const Model& model, const std::filesystem::path& path) {
  return plan_load(model, io::SafetensorsReader(path)).problems;
}

void load_model(Model& model, const std::filesystem::path& path) {
  ACC_CHECK(!nn::has_deferred_parameters(model), "load_model: ", path.string(), ": this ", model.type_name(),
            " was made with deferred initialisation (acc::make_model with fsdp_cpu_ram_efficient_loading, or an "
            "nn::DeferredInit scope), so its parameters have no memory to load into. Load into a model made "
            "normally, or load a sharded checkpoint after acc::accelerate()");
  io::SafetensorsReader reader(path);
  const Plan plan = plan_load(model, reader);
  ACC_CHECK(plan.problems.empty(), "load_model: ", path.string(), " does not match ",
            model.type_name(), plan.problems.describe());
  autograd::NoGradGuard no_grad;
  for (const auto& [name, p] : model.named_parameters()) {
    Tensor value = reader.read(plan.file_name_of.at(name));
    if (model.stored_transposed(name)) value = ops::transpose(value);
    Tensor(p).copy_(value);
  }
}

}  // namespace acc::models
