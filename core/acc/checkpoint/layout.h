#pragma once
// What goes where in a checkpoint, and the file-system steps that make saving atomic. Internal
// to acc::checkpoint.
#include <filesystem>
#include <optional>
#include <vector>

#include "acc/accelerate/sharded_model.h"
#include "acc/optim/optimizer.h"

namespace acc::checkpoint {

// The shape a parameter has in a Hugging Face file (Conv1D weights are stored [in, out]).
Shape file_layout_shape(const models::Model& model, const std::string& name, const Shape& shape);

// Per piece, the optimizer parameter (group, index) that is it, if the optimizer updates it.
struct OptimizerSlot {
  size_t group = 0, index = 0;
};
std::vector<std::optional<OptimizerSlot>> optimizer_slots(
    const optim::Optimizer* optimizer, const std::vector<ShardedModel::ParameterPiece>& pieces);

// step_000100 -> step_000100.tmp next to it.
std::filesystem::path temp_dir_for(const std::filesystem::path& dir);
// fsync of a file or a directory (making a rename inside it durable).
void sync_path(const std::filesystem::path& path);
// Renames `tmp` to `dir`, replacing an existing `dir`, and syncs their parent.
void replace_directory(const std::filesystem::path& tmp, const std::filesystem::path& dir);

}  // namespace acc::checkpoint
