// SaveJob (save_job.h): every rank writes the pieces it owns into its shard file, rank 0 writes
// the manifest and commits the directory once every rank has succeeded. save_state runs the
// three stages inline; save_async (async_save.cpp) runs write() on a thread of its own.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <tbb/parallel_for.h>

#include "acc/autograd/grad_mode.h"
#include "acc/checkpoint/blocks.h"
#include "acc/checkpoint/checkpoint.h"
#include "acc/checkpoint/layout.h"
#include "acc/checkpoint/manifest.h"
#include "acc/checkpoint/save_job.h"
#include "acc/distributed/agreement.h"
#include "acc/io/safetensors.h"
#include "acc/kernels/transpose.h"
#include "acc/memory/allocator.h"
#include "acc/optim/optimizer.h"
#include "acc/runtime/init.h"
#include "acc/runtime/preemption.h"
#include "acc/util/activity.h"
#include "acc/util/error.h"
#include "acc/util/log.h"
#include "acc/util/profiler.h"

namespace acc::checkpoint {

// The parameters of model.safetensors (Hugging Face names and layout), taken from the model when
// a save starts, so that the file may be written on another thread.
struct FullModelLayout {
  struct Entry {
    std::string name;
    Shape shape;       // acc's layout
    Shape file_shape;  // Hugging Face's
    bool transposed = false;
  };
  std::vector<Entry> entries;

  explicit FullModelLayout(const ShardedModel& model) {
    for (const auto& [name, shape] : model.whole_parameter_shapes())
      entries.push_back({name, shape, file_layout_shape(model.module(), name, shape),
                         model.module().stored_transposed(name)});
  }
};

namespace {

// Test hook: ACC_TEST_CHECKPOINT_FAULT=kill:R[:N] makes rank R die (SIGKILL) halfway through
// its shard file in the N-th save of the process (without N: in every save); fail:R[:N] makes that
// write fail as a full disk would; hold:R[:N] stops that write halfway until the process gets a
// preemption notice (at most 60 s), so the preemption test's notice comes while an asynchronous
// save is still writing. Used by the crash and preemption tests only; a job restarted by
// accelerate launch --max_restarts (ACC_RESTART_COUNT > 0) runs clean.
enum class Fault { none, kill, fail, hold };

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
  const std::string a = action;
  return a == "kill" ? Fault::kill : a == "hold" ? Fault::hold : Fault::fail;
}

void hold_until_preempted() {
  log::info("ACC_TEST_CHECKPOINT_FAULT: this rank's shard write is held until the preemption notice");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!preemption_requested() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  log::info("ACC_TEST_CHECKPOINT_FAULT: the held shard write goes on ({})",
            preemption_requested() ? "preemption notice" : "60 s passed");
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

// A copy of `t` in host memory of the tier it lives in (file-tier state is copied into the
// file tier, file to file in the kernel, so a snapshot of a larger-than-memory model needs
// neither the memory nor a page of it mapped in), counted under Category::checkpoint. Copied in
// 4 MiB blocks over the thread pool.
Tensor snapshot_of(const Tensor& t) {
  const memory::Tier tier = t.storage()->tier();
  memory::CategoryScope category(memory::Category::checkpoint);
  memory::TierScope in_tier(tier);
  Tensor copy = Tensor::empty(t.shape(), t.dtype());
  const auto* from = static_cast<const char*>(t.raw_data());
  auto* to = static_cast<char*>(copy.raw_data());
  constexpr size_t kBlock = size_t{4} << 20;
  const size_t bytes = t.nbytes();
  tbb::parallel_for(size_t{0}, (bytes + kBlock - 1) / kBlock, [&](size_t b) {
    const size_t at = b * kBlock, n = std::min(kBlock, bytes - at);
    memory::copy_block(to + at, from + at, n, tier);
  });
  return copy;
}

// Writes an item in 64 MiB blocks; a file-tier tensor (fsdp_offload_dir) is read from its file
// 8 MiB at a time into one buffer (for_each_block): saving a state larger than memory holds that
// much beside it (Checkpoint.SavesTheStateInFilesThroughOneSmallBuffer checks it).
void write_item(io::SafetensorsWriter& writer, const std::string& key, const Tensor& data) {
  if (data.nbytes() == 0) writer.write(key, data.raw_data());
  const size_t block = data.storage()->tier() == memory::Tier::file ? size_t{8} << 20 : size_t{64} << 20;
  for_each_block(data, static_cast<int64_t>(block / dtype_size(data.dtype())),
                 [&](const Tensor& part, int64_t) { writer.append(key, part.raw_data(), part.nbytes()); });
}

// The items of this rank's shard file: its owned parameter pieces (unless the model goes to the
// full file) and their optimizer state. A collective (written_ranges).
std::vector<SaveJob::Item> shard_items(const TrainingState& state, bool model_in_shards) {
  const auto pieces = state.model->parameter_pieces();
  const auto written = written_ranges(pieces);
  const auto slots = optimizer_slots(state.optimizer, pieces);
  const models::Model& inner = state.model->module();
  std::vector<SaveJob::Item> items;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto [offset, count] = written[i];
    if (count == 0) continue;
    const auto& piece = pieces[i];
    auto item = [&](std::string key, const Tensor& t, std::optional<int64_t> step, bool parameter) {
      TensorRecord rec;
      rec.shape = piece.shape;
      rec.step = step;
      rec.hf_transposed = parameter && inner.stored_transposed(piece.name);
      rec.pieces.push_back({"", key, piece.begin + offset, count, 0, false, piece.slice});
      items.push_back({std::move(key), t.slice_flat(offset, {count}), std::move(rec)});
    };
    if (model_in_shards) item(piece.name, piece.master, std::nullopt, true);
    if (!slots[i]) continue;
    const optim::ParamState& s = state.optimizer->state(slots[i]->group, slots[i]->index);
    for (size_t k = 0; k < s.tensors.size(); ++k)  // none before the parameter's first step
      item(optimizer_key(state.optimizer->state_names()[k], piece.name), s.tensors[k], s.step, false);
  }
  return items;
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
    kernels::transpose32(in + c0, cols, out.data(), rows, rows, n);
    writer.append(name, out.data(), static_cast<uint64_t>(n * rows) * sizeof(float));
  }
}

// model.safetensors, written by rank 0 as the parameters arrive (whole, in acc's layout).
class FullModelFile {
 public:
  FullModelFile(const std::filesystem::path& tmp, FullModelLayout layout) : layout_(std::move(layout)) {
    std::vector<io::SafetensorsEntry> entries;
    for (const auto& e : layout_.entries) {
      transposed_[e.name] = e.transposed;
      entries.push_back({e.name, DType::f32, e.file_shape});
    }
    writer_.emplace(tmp / kFullModelFile, std::move(entries), io::SafetensorsMetadata{{"format", "pt"}});
  }
  void add(const std::string& name, const Tensor& value) {
    if (transposed_.at(name))
      append_transposed(*writer_, name, value);
    else
      writer_->write(name, value.raw_data());
  }
  Manifest finish() {
    writer_->finish();
    Manifest part;
    part.files[kFullModelFile] = writer_->file_bytes();
    for (const auto& e : layout_.entries) {
      TensorRecord& rec = part.tensors[e.name];
      rec.shape = e.shape;
      rec.hf_transposed = e.transposed;
      rec.pieces.push_back({kFullModelFile, e.name, 0, shape_numel(e.shape), writer_->crc32(e.name), e.transposed});
    }
    return part;
  }

 private:
  FullModelLayout layout_;
  std::map<std::string, bool> transposed_;
  std::optional<io::SafetensorsWriter> writer_;
};

void merge_into(Manifest& into, const Manifest& part) {
  for (const auto& [file, bytes] : part.files) into.files[file] = bytes;
  for (const auto& [key, rec] : part.tensors) {
    TensorRecord& t = into.tensors[key];
    t.shape = rec.shape;
    t.step = rec.step;
    t.hf_transposed = t.hf_transposed || rec.hf_transposed;
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

SaveJob::SaveJob(const std::filesystem::path& dir, const TrainingState& state, bool snapshot)
    : dir_(dir), tmp_(temp_dir_for(dir)), main_(world().rank() == 0) {
  activity::Phase phase("checkpoint save");
  ACC_CHECK(state.model != nullptr, "save_state: TrainingState.model is required");
  autograd::NoGradGuard no_grad;
  full_ = state.config && strategy_answer(*state.config, &OptionSection::full_checkpoints, false);
  what_ = "save_state " + dir.string() + ": ";
  // What a failed save leaves, said only when true: dir is replaced only by a finished save.
  kept_ = std::filesystem::exists(dir / kManifestFile)
              ? "; the checkpoint already in " + dir.string() + " is kept"
              : "; nothing was saved to " + dir.string();
  const Fault fault = fault_for_this_save(world().rank());
  inject_kill_ = fault == Fault::kill;
  inject_fail_ = fault == Fault::fail;
  inject_hold_ = fault == Fault::hold;
  if (main_) try {
      std::filesystem::remove_all(tmp_);
      std::filesystem::create_directories(tmp_);
      run_ = describe_run(state, full_);
    } catch (...) {
      error_ = std::current_exception();
    }
  agree("cannot create " + tmp_.string());

  items_ = shard_items(state, !full_);
  shard_file_ = shard_file_name(world().rank(), world().size());
  snapshot_ = snapshot;
  if (snapshot) optim::hold_steps_until(copied_.get_future().share());
  if (!full_) return;
  // Every rank takes part in gathering one unit at a time. Rank 0 writes each as it arrives, or
  // copies it to write later; a failed write must not stop it from taking part in the remaining
  // gathers (the other ranks would wait for it until the collective timeout).
  std::optional<FullModelFile> file;
  if (main_) try {
      if (snapshot)
        full_layout_ = std::make_unique<FullModelLayout>(*state.model);
      else
        file.emplace(tmp_, FullModelLayout(*state.model));
    } catch (...) {
      error_ = std::current_exception();
    }
  state.model->visit_full_parameters([&](const std::vector<std::pair<std::string, Tensor>>& params) {
    if (!main_ || error_) return;
    try {
      for (const auto& [name, value] : params)
        if (file) {
          file->add(name, value);
        } else {
          full_copy_.emplace_back(name, snapshot_of(value));
        }
    } catch (...) {
      error_ = std::current_exception();
    }
  });
  if (file && !error_) try {
      merge_into(part_, file->finish());
    } catch (...) {
      error_ = std::current_exception();
    }
}

SaveJob::~SaveJob() = default;

void SaveJob::copy() noexcept {
  if (!snapshot_) return;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (!error_)
      for (auto& item : items_) item.data = snapshot_of(item.data);
  } catch (...) {
    error_ = std::current_exception();
  }
  copied_.set_value();
  profiler::add("checkpoint.snapshot", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                /*alongside=*/true);
}

void SaveJob::write() noexcept {
  if (error_) return;  // rank 0's FULL write or the copy already failed
  try {
    if (full_layout_) {  // FULL_STATE_DICT from the snapshot
      FullModelFile file(tmp_, *full_layout_);
      for (const auto& [name, value] : full_copy_) file.add(name, value);
      merge_into(part_, file.finish());
      full_copy_.clear();
    }
    if (!items_.empty()) {
      const std::string& file = shard_file_;
      std::vector<io::SafetensorsEntry> entries;
      for (const auto& item : items_) entries.push_back({item.key, DType::f32, {item.data.numel()}});
      io::SafetensorsWriter writer(tmp_ / file, std::move(entries), {{"format", "acc-shard"}});
      for (size_t n = 0; n < items_.size(); ++n) {
        if (n == items_.size() / 2 && inject_kill_) std::raise(SIGKILL);
        if (n == items_.size() / 2 && inject_fail_)
          ACC_FAIL("No space left on device (simulated by ACC_TEST_CHECKPOINT_FAULT)");
        if (n == items_.size() / 2 && inject_hold_) hold_until_preempted();
        write_item(writer, items_[n].key, items_[n].data);
      }
      writer.finish();
      part_.files[file] = writer.file_bytes();
      for (auto& item : items_) {
        PieceRecord& piece = item.record.pieces.front();
        piece.file = file;
        piece.crc32 = writer.crc32(item.key);
        Manifest one;
        one.tensors[item.key] = item.record;
        merge_into(part_, one);
      }
    }
  } catch (...) {
    error_ = std::current_exception();
  }
  items_.clear();  // the snapshot's memory goes back now, not at the next save
  full_copy_.clear();
}

void SaveJob::finish() {
  activity::Phase phase("checkpoint save");
  agree("writing failed" + kept_);
  const auto parts = dist::all_gather_strings(world(), part_.to_json());
  if (main_) try {
      for (const auto& text : parts) merge_into(run_, Manifest::parse(text, "a rank's part of the manifest"));
      commit(tmp_, dir_, run_);
    } catch (...) {
      error_ = std::current_exception();
    }
  agree("committing failed" + kept_);
}

// Every rank learns of any rank's failure; rank 0 then removes the unfinished directory.
void SaveJob::agree(const std::string& failure) {
  try {
    dist::raise_if_any_failed(world(), what_ + failure, error_);
  } catch (...) {
    std::error_code ignored;
    if (main_) std::filesystem::remove_all(tmp_, ignored);
    throw;
  }
}

void save_state(const std::filesystem::path& dir, const TrainingState& state) {
  finish_saves();
  SaveJob job(dir, state, /*snapshot=*/false);
  job.write();
  job.finish();
}

}  // namespace acc::checkpoint
