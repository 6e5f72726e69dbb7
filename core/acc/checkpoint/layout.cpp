#include "acc/checkpoint/layout.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "acc/util/error.h"

namespace acc::checkpoint {

Shape file_layout_shape(const models::Model& model, const std::string& name, const Shape& shape) {
  return model.stored_transposed(name) ? Shape(shape.rbegin(), shape.rend()) : shape;
}

std::vector<std::optional<OptimizerSlot>> optimizer_slots(
    const optim::Optimizer* optimizer, const std::vector<ShardedModel::ParameterPiece>& pieces) {
  std::vector<std::optional<OptimizerSlot>> out(pieces.size());
  if (!optimizer) return out;
  // The optimizer holds the pieces' master tensors themselves (param_groups() hands them out):
  // the same first element is the same piece.
  std::map<const void*, size_t> by_address;
  for (size_t i = 0; i < pieces.size(); ++i) by_address[pieces[i].master.raw_data()] = i;
  const auto& groups = optimizer->param_groups();
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t i = 0; i < groups[g].params.size(); ++i) {
      const Tensor& p = groups[g].params[i];
      const auto it = by_address.find(p.raw_data());
      ACC_CHECK(it != by_address.end() && pieces[it->second].master.numel() == p.numel(),
                "checkpoint: the optimizer's parameter ", i, " of group ", g, " (", p.describe(),
                ") is none of the model's pieces; build the optimizer on the sharded model's "
                "param_groups() or parameters()");
      out[it->second] = OptimizerSlot{g, i};
    }
  return out;
}

namespace {

// "ckpt/step_1/" -> "ckpt/step_1": a sibling can then be named from its filename.
std::filesystem::path without_trailing_slash(const std::filesystem::path& dir) {
  return dir.has_filename() ? dir : dir.parent_path();
}

}  // namespace

std::filesystem::path temp_dir_for(const std::filesystem::path& dir) {
  const auto clean = without_trailing_slash(dir);
  return clean.parent_path() / (clean.filename().string() + ".tmp");
}

void sync_path(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ACC_CHECK(fd >= 0, "cannot open ", path.string(), " to sync it (", std::strerror(errno), ")");
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  ACC_CHECK(rc == 0, "fsync of ", path.string(), " failed (", std::strerror(err), ")");
}

void replace_directory(const std::filesystem::path& tmp, const std::filesystem::path& dir) {
  const auto clean = without_trailing_slash(dir);
  // A directory cannot be renamed over a non-empty one: move the old one aside first. Between
  // the two renames the old copy still exists under .old.
  const std::filesystem::path old = clean.parent_path() / (clean.filename().string() + ".old");
  std::filesystem::remove_all(old);
  if (std::filesystem::exists(clean)) std::filesystem::rename(clean, old);
  std::filesystem::rename(tmp, clean);
  std::filesystem::remove_all(old);
  sync_path(clean.parent_path().empty() ? std::filesystem::path(".") : clean.parent_path());
}

}  // namespace acc::checkpoint
