// A directory of checkpoints: root/step_%06d per save, root/latest naming the newest.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>

#include "acc/checkpoint/checkpoint.h"
#include "acc/checkpoint/layout.h"
#include "acc/checkpoint/manifest.h"
#include "acc/distributed/agreement.h"
#include "acc/io/atomic_file.h"
#include "acc/runtime/init.h"
#include "acc/util/error.h"
#include "acc/util/log.h"

namespace acc::checkpoint {

namespace {

constexpr const char* kLatestFile = "latest";

// Complete step directories (no .tmp / .old), oldest first.
std::vector<std::pair<int64_t, std::filesystem::path>> step_dirs(const std::filesystem::path& root) {
  static const std::regex pattern("step_([0-9]+)");
  std::vector<std::pair<int64_t, std::filesystem::path>> out;
  for (const auto& e : std::filesystem::directory_iterator(root)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (e.is_directory() && std::regex_match(name, m, pattern))
      out.emplace_back(std::stoll(m[1].str()), e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// resumable_checkpoint as this rank sees the directory.
std::optional<std::filesystem::path> resumable_here(const std::filesystem::path& root) {
  if (auto latest = latest_checkpoint(root)) return latest;
  if (!std::filesystem::is_directory(root)) return std::nullopt;
  const auto dirs = step_dirs(root);
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    if (!std::filesystem::is_regular_file(it->second / kManifestFile)) {
      log::warn("{}: no {} (an unfinished save), skipped", it->second.string(), kManifestFile);
      continue;
    }
    log::warn("{}/{} is missing: resuming from the newest complete checkpoint, {}", root.string(), kLatestFile,
              it->second.string());
    return it->second;
  }
  return std::nullopt;
}

}  // namespace

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%06lld", static_cast<long long>(step));
  return buf;
}

void saving_into(const std::filesystem::path& root, const std::function<void()>& part) {
  try {
    part();
  } catch (const Error& e) {
    std::string left;
    try {
      const auto previous = latest_checkpoint(root);
      left = previous ? "; " + (root / kLatestFile).string() + " still names " + previous->string()
                      : "; there is no earlier checkpoint in " + root.string();
    } catch (const Error&) {  // a damaged latest says so itself at the next resume
    }
    ACC_FAIL(e.what(), left);
  }
}

void point_latest_at(const std::filesystem::path& root, const std::filesystem::path& dir, int keep) {
  std::exception_ptr error;
  if (world().rank() == 0) try {
      io::write_file_atomically(root / kLatestFile, [&](std::ostream& out) {
        out << dir.filename().string() << "\n";
      });
      sync_path(root);
      if (keep > 0) {
        auto dirs = step_dirs(root);
        for (size_t i = 0; i + static_cast<size_t>(keep) < dirs.size(); ++i)
          if (dirs[i].second.filename() != dir.filename()) std::filesystem::remove_all(dirs[i].second);
      }
    } catch (...) {
      error = std::current_exception();
    }
  dist::raise_if_any_failed(world(), "save_checkpoint " + root.string() + ": " + dir.string() +
                            " was saved but updating " + kLatestFile + " failed", error);
}

std::filesystem::path save_checkpoint(const std::filesystem::path& root, const TrainingState& state,
                                      int keep) {
  finish_saves();
  const auto dir = root / step_dir_name(state.position.step);
  saving_into(root, [&] { save_state(dir, state); });  // latest is untouched so far
  point_latest_at(root, dir, keep);
  return dir;
}

std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& root) {
  const auto path = root / kLatestFile;
  if (!std::filesystem::is_regular_file(path)) return std::nullopt;
  std::ifstream in(path);
  std::string name;
  std::getline(in, name);
  ACC_CHECK(!name.empty() && name.find('/') == std::string::npos, path.string(),
            " should name a step directory next to it, it holds \"", name, "\"");
  const auto dir = root / name;
  ACC_CHECK(std::filesystem::is_regular_file(dir / kManifestFile), path.string(), " names ", name,
            " but ", dir.string(), " has no ", kManifestFile);
  return dir;
}

std::optional<std::filesystem::path> resumable_checkpoint(const std::filesystem::path& root) {
  // Rank 0 looks, every rank takes its answer: ranks looking while a save moves `latest`, or
  // machines that see the directory late, would otherwise resume from different steps, or only
  // some of them at all (load_state then waits for ranks that never call it).
  auto& group = world();
  std::string found;
  std::exception_ptr error;
  if (group.rank() == 0) try {
      if (const auto dir = resumable_here(root)) found = dir->string();
    } catch (...) {
      error = std::current_exception();
    }
  dist::raise_if_any_failed(group, "looking for a checkpoint to resume from in " + root.string(), error);
  found = dist::all_gather_strings(group, found)[0];
  if (found.empty()) return std::nullopt;
  return std::filesystem::path(found);
}

std::filesystem::path resolve_checkpoint(const std::filesystem::path& path) {
  if (std::filesystem::is_regular_file(path / kManifestFile)) return path;
  const bool latest_file = path.filename() == kLatestFile && std::filesystem::is_regular_file(path);
  if (auto dir = latest_checkpoint(latest_file ? path.parent_path() : path)) return *dir;
  return path;  // not a checkpoint: the reader's error names it
}

}  // namespace acc::checkpoint
