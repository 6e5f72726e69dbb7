#pragma once
// What goes where in a checkpoint, and the file-system steps that make saving atomic. Internal
// to acc::checkpoint.
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "acc/strategy/sharded_model.h"
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

// --- a directory of checkpoints (directory.cpp) ---
// "step_000100".
std::string step_dir_name(int64_t step);
// Runs `part` of a save into root. An acc::Error from it is raised again with what a resume
// from root would find now: "; root/latest still names X", or "; there is no earlier checkpoint
// in root".
void saving_into(const std::filesystem::path& root, const std::function<void()>& part);
// Once `dir` in root is committed: root/latest names it, and with keep > 0 only the newest
// `keep` step directories stay. A collective.
void point_latest_at(const std::filesystem::path& root, const std::filesystem::path& dir, int keep);

}  // namespace acc::checkpoint
