// save_state: every rank writes the pieces it owns into its shard file, rank 0 writes the
// manifest and commits the directory once every rank has succeeded.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "acc/autograd/grad_mode.h"
#include "acc/checkpoint/checkpoint.h"
#include "acc/checkpoint/layout.h"
#include "acc/checkpoint/manifest.h"
#include "acc/distributed/agreement.h"
#include "acc/io/safetensors.h"
#include "acc/runtime/init.h"
#include "acc/util/activity.h"
#include "acc/util/error.h"

namespace acc::checkpoint {

namespace {

// Test hook: ACC_TEST_CHECKPOINT_FAULT=kill:R[:N] makes rank R die (SIGKILL) halfway through
// its shard file in the N-th save of the process (without N: in every save); fail:R[:N] makes that
// write fail as a full disk would. Used by the crash tests only; a job restarted by
// accelerate launch --max_restarts (ACC_RESTART_COUNT > 0) runs clean.
enum class Fault { none, kill, fail };

Fault fault_for_this_save(int rank) {
  static int saves = 0;
  ++saves;
  const char* spec = std::getenv("ACC_TEST_CHECKPOINT_FAULT");
  const char* restart = std::getenv("ACC_RESTART_COUNT");
  if (restart && std::atoi(restart) > 0) return Fault::none;
  char action[8] = {};
  int who = -1, nth = 0;
  if (!spec || std::sscanf(spec, "%7[a-z]:%d:%d", action, &who, &nth) < 2 || who != rank ||
      (nth > 0 && nth != saves))
    return Fault::none;
  return std::string(action) == "kill" ? Fault::kill : Fault::fail;
}

void inject(Fault fault) {
  if (fault == Fault::kill) std::raise(SIGKILL);
  if (fault == Fault::fail) ACC_FAIL("No space left on device (simulated by ACC_TEST_CHECKPOINT_FAULT)");
}

std::string shard_file_name(int rank, int world) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "shard-%05d-of-%05d.safetensors", rank, world);
  return buf;
}

// The part of each piece this rank writes: elements [offset, offset + count) of it (count 0:
// none). Every element of a tensor is written once. Ranks holding the same piece (replicas under
// NO_SHARD and the hybrid strategies) take turns, so the writing is spread over them. Pieces of
// one tensor that overlap without being the same (a parameter whole over SPMD's `model` axis,
// which the flat shards of each model rank may cut at other places) leave the overlap to the
// piece that starts first.
struct WrittenRange {
  int64_t offset = 0, count = 0;
};

std::vector<WrittenRange> written_ranges(const std::vector<ShardedModel::ParameterPiece>& pieces) {
  auto& group = world();
  auto tensor_of = [](const ShardedModel::ParameterPiece& p) {  // the same tensor, or slice of it
    std::string key = p.name;
    if (p.slice)
      for (const auto& [b, e] : p.slice->blocks) key += '\t' + std::to_string(b) + ':' + std::to_string(e);
    return key;
  };
  using Range = std::pair<int64_t, int64_t>;  // [begin, end) in the tensor (or slice)
  auto range_of = [](const ShardedModel::ParameterPiece& p) { return Range{p.begin, p.begin + p.master.numel()}; };
  std::ostringstream mine;
  for (const auto& p : pieces) {
    const auto [begin, end] = range_of(p);
    mine << begin << ' ' << end << ' ' << tensor_of(p) << '\n';
  }
  const auto all = dist::all_gather_strings(group, mine.str());
  std::map<std::string, std::map<Range, std::vector<int>>> holders;  // tensor -> range -> ranks, ascending
  for (int r = 0; r < group.size(); ++r) {
    std::istringstream in(all[r]);
    Range range;
    for (std::string tensor; in >> range.first >> range.second && std::getline(in >> std::ws, tensor);)
      holders[tensor][range].push_back(r);
  }
  std::map<std::pair<std::string, Range>, std::pair<int, Range>> writes;  // -> (rank, what it writes)
  int turn = 0;
  for (const auto& [tensor, ranges] : holders) {
    int64_t written_to = 0;  // ranges in order of their begin: what lies before this is written
    for (const auto& [range, ranks] : ranges) {
      const Range part{std::max(range.first, written_to), std::max(range.second, written_to)};
      writes[{tensor, range}] = {ranks[turn++ % ranks.size()], part};
      written_to = std::max(written_to, range.second);
    }
  }
  std::vector<WrittenRange> out;
  for (const auto& p : pieces) {
    const auto& [rank, part] = writes.at({tensor_of(p), range_of(p)});
    out.push_back(rank == group.rank() ? WrittenRange{part.first - p.begin, part.second - part.first} : WrittenRange{});
  }
  return out;
}

// This rank's shard file: its owned parameter pieces (unless the model goes to the full file)
// and their optimizer state. Returns what the manifest needs to know of it.
Manifest write_shard_file(const std::filesystem::path& tmp, const TrainingState& state,
                          bool model_in_shards) {
  const int rank = world().rank();
  const Fault fault = fault_for_this_save(rank);
  const auto pieces = state.model->parameter_pieces();
  const auto written = written_ranges(pieces);
  const auto slots = optimizer_slots(state.optimizer, pieces);

  struct Item {
    std::string key;
    size_t piece;
    Tensor data;  // the written part
    std::optional<int64_t> step;
  };
  std::vector<Item> items;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto [offset, count] = written[i];
    if (count == 0) continue;
    auto part = [&](const Tensor& t) { return t.slice_flat(offset, {count}); };
    if (model_in_shards) items.push_back({pieces[i].name, i, part(pieces[i].master), std::nullopt});
    if (!slots[i]) continue;
    const optim::ParamState& s = state.optimizer->state(slots[i]->group, slots[i]->index);
    for (size_t k = 0; k < s.tensors.size(); ++k)  // none before the parameter's first step
      items.push_back({optimizer_key(state.optimizer->state_names()[k], pieces[i].name), i,
                       part(s.tensors[k]), s.step});
  }
  Manifest part;
  if (items.empty()) return part;
  const std::string file = shard_file_name(rank, world().size());
  std::vector<io::SafetensorsEntry> entries;
  for (const auto& item : items) entries.push_back({item.key, DType::f32, {item.data.numel()}});
  io::SafetensorsWriter writer(tmp / file, std::move(entries), {{"format", "acc-shard"}});
  for (size_t n = 0; n < items.size(); ++n) {
    if (n == items.size() / 2) inject(fault);
    writer.write(items[n].key, items[n].data.raw_data());
  }
  writer.finish();
  part.files[file] = writer.file_bytes();
  for (const auto& item : items) {
    const auto& piece = pieces[item.piece];
    TensorRecord& rec = part.tensors[item.key];
    rec.shape = piece.shape;
    rec.step = item.step;
    rec.pieces.push_back({file, item.key, piece.begin + written[item.piece].offset, item.data.numel(),
                          writer.crc32(item.key), false, piece.slice});
  }
  return part;
}

// A [rows, cols] matrix written as its [cols, rows] transpose (Hugging Face's Conv1D layout) a
// block of output rows at a time, so saving holds at most 4 MB beyond the gathered unit.
void append_transposed(io::SafetensorsWriter& writer, const std::string& name, const Tensor& value) {
  const int64_t rows = value.shape()[0], cols = value.shape()[1];
  const int64_t block = std::max<int64_t>(1, (int64_t{1} << 20) / rows);  // output rows per block
  std::vector<float> out(static_cast<size_t>(std::min(block, cols) * rows));
  const float* in = value.data<float>();
  for (int64_t c0 = 0; c0 < cols; c0 += block) {
    const int64_t n = std::min(block, cols - c0);
    for (int64_t c = 0; c < n; ++c)
      for (int64_t r = 0; r < rows; ++r) out[static_cast<size_t>(c * rows + r)] = in[r * cols + c0 + c];
    writer.append(name, out.data(), static_cast<uint64_t>(n * rows) * sizeof(float));
  }
}

// model.safetensors with Hugging Face names and layout, written by rank 0 while every rank
// takes part in gathering one unit at a time.
Manifest write_full_model(const std::filesystem::path& tmp, ShardedModel& model) {
  const models::Model& inner = model.module();
  const bool writes = world().rank() == 0;
  std::optional<io::SafetensorsWriter> writer;
  std::map<std::string, Shape> shapes;
  if (writes) {
    std::vector<io::SafetensorsEntry> entries;
    for (const auto& [name, shape] : model.whole_parameter_shapes()) {
      shapes[name] = shape;
      entries.push_back({name, DType::f32, file_layout_shape(inner, name, shape)});
    }
    writer.emplace(tmp / kFullModelFile, std::move(entries), io::SafetensorsMetadata{{"format", "pt"}});
  }
  // A failed write must not stop rank 0 from taking part in the remaining gathers: the other
  // ranks would wait for it until the collective timeout.
  std::exception_ptr failed;
  model.visit_full_parameters([&](const std::vector<std::pair<std::string, Tensor>>& params) {
    if (!writes || failed) return;
    try {
      for (const auto& [name, value] : params)
        if (inner.stored_transposed(name))
          append_transposed(*writer, name, value);
        else
          writer->write(name, value.raw_data());
    } catch (...) {
      failed = std::current_exception();
    }
  });
  if (failed) std::rethrow_exception(failed);
  Manifest part;
  if (!writes) return part;
  writer->finish();
  part.files[kFullModelFile] = writer->file_bytes();
  for (const auto& [name, shape] : shapes) {
    TensorRecord& rec = part.tensors[name];
    rec.shape = shape;
    rec.pieces.push_back({kFullModelFile, name, 0, shape_numel(shape), writer->crc32(name),
                          inner.stored_transposed(name)});
  }
  return part;
}

void merge_into(Manifest& into, const Manifest& part) {
  for (const auto& [file, bytes] : part.files) into.files[file] = bytes;
  for (const auto& [key, rec] : part.tensors) {
    TensorRecord& t = into.tensors[key];
    t.shape = rec.shape;
    t.step = rec.step;
    t.pieces.insert(t.pieces.end(), rec.pieces.begin(), rec.pieces.end());
  }
}

Manifest describe_run(const TrainingState& state, bool full) {
  Manifest m;
  m.model = state.model->module().type_name();
  m.strategy = state.config ? state.config->strategy_name() : state.model->type_name();
  m.state_dict_type = to_string(full ? StateDictType::FULL_STATE_DICT : StateDictType::SHARDED_STATE_DICT);
  m.world_size = world().size();
  m.position = state.position;
  if (state.optimizer) {
    m.optimizer = state.optimizer->name();
    m.optimizer_steps = state.optimizer->steps_taken();
    m.optimizer_state_names = state.optimizer->state_names();
  }
  if (state.scheduler) m.scheduler_step = state.scheduler->current_step();
  if (state.config) m.config_yaml = state.config->to_yaml();
  return m;
}

// Rank 0: manifest.json, then the directory renamed into place.
void commit(const std::filesystem::path& tmp, const std::filesystem::path& dir,
            const Manifest& manifest) {
  {
    const auto path = tmp / kManifestFile;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    ACC_CHECK(out.is_open(), "cannot create ", path.string());
    out << manifest.to_json();
    out.flush();
    ACC_CHECK(out.good(), "writing ", path.string(), " failed (disk full?)");
  }
  sync_path(tmp / kManifestFile);
  sync_path(tmp);
  replace_directory(tmp, dir);
}

}  // namespace

void save_state(const std::filesystem::path& dir, const TrainingState& state) {
  activity::Phase phase("checkpoint save");
  ACC_CHECK(state.model != nullptr, "save_state: TrainingState.model is required");
  autograd::NoGradGuard no_grad;
  auto& group = world();
  const bool main = group.rank() == 0;
  const bool full = state.config &&
                    state.config->dist.fsdp.state_dict_type == StateDictType::FULL_STATE_DICT;
  const std::filesystem::path tmp = temp_dir_for(dir);
  const std::string what = "save_state " + dir.string() + ": ";
  // What a failed save leaves, said only when true: dir is replaced only by a finished save.
  const std::string kept = std::filesystem::exists(dir / kManifestFile)
                               ? "; the checkpoint already in " + dir.string() + " is kept"
                               : "; nothing was saved to " + dir.string();

  std::exception_ptr error;
  // Every rank learns of any rank's failure; rank 0 then removes the unfinished directory.
  auto agree = [&](const std::string& failure) {
    try {
      dist::raise_if_any_failed(group, what + failure, error);
    } catch (...) {
      std::error_code ignored;
      if (main) std::filesystem::remove_all(tmp, ignored);
      throw;
    }
  };
  if (main) try {
      std::filesystem::remove_all(tmp);
      std::filesystem::create_directories(tmp);
    } catch (...) {
      error = std::current_exception();
    }
  agree("cannot create " + tmp.string());

  Manifest part;
  try {
    part = write_shard_file(tmp, state, !full);
  } catch (...) {
    error = std::current_exception();
  }
  agree("writing the shards failed" + kept);
  if (full) {
    try {
      merge_into(part, write_full_model(tmp, *state.model));
    } catch (...) {
      error = std::current_exception();
    }
    agree(std::string("writing ") + kFullModelFile + " failed" + kept);
  }

  const auto parts = dist::all_gather_strings(group, part.to_json());
  if (main) try {
      Manifest manifest = describe_run(state, full);
      for (const auto& text : parts) merge_into(manifest, Manifest::parse(text, "a rank's part of the manifest"));
      for (auto& [key, rec] : manifest.tensors)
        rec.hf_transposed = !is_optimizer_key(key) && state.model->module().stored_transposed(key);
      commit(tmp, dir, manifest);
    } catch (...) {
      error = std::current_exception();
    }
  agree("committing failed" + kept);
}

}  // namespace acc::checkpoint
