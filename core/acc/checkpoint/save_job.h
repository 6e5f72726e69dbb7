#pragma once
// One save of one step directory, in three stages so that the writing can run on another
// thread while training goes on (save_async) or inline (save_state):
//   start   a collective: step_X.tmp/ created, what each rank writes agreed, the run described;
//           FULL_STATE_DICT gathers the model here (rank 0 writes it, or copies it when
//           snapshotting).
//   write   this rank's files: no communication, so it may run on any thread. With snapshot, it
//           first copies every byte to write to host memory (memory::Category::checkpoint, in
//           the tier the byte lives in), and the next Optimizer::step() waits for that copy:
//           the training thread goes on with the next forward and backward meanwhile.
//   finish  a collective: every rank's outcome agreed, rank 0 writes the manifest and renames
//           step_X.tmp/ to step_X/. A failure anywhere is one error on every rank.
// Internal to acc::checkpoint.
#include <exception>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "acc/checkpoint/checkpoint.h"
#include "acc/checkpoint/manifest.h"

namespace acc::checkpoint {

struct FullModelLayout;  // save.cpp

class SaveJob {
 public:
  SaveJob(const std::filesystem::path& dir, const TrainingState& state, bool snapshot);
  ~SaveJob();
  SaveJob(const SaveJob&) = delete;
  SaveJob& operator=(const SaveJob&) = delete;

  // With snapshot: copies what this rank writes; the next Optimizer::step() waits for it. Then
  // write() writes and fsyncs this rank's files and drops the copy. Neither throws: a failure
  // is kept for finish().
  void copy() noexcept;
  void write() noexcept;
  // Raises the error of any rank (naming it and what is left); else commits the directory.
  void finish();

  const std::filesystem::path& dir() const { return dir_; }

  // What this rank writes into its shard file: one entry per item.
  struct Item {
    std::string key;  // parameter name, or optimizer_key(state, parameter)
    Tensor data;      // the written part, 1-D f32 (a view of the model's tensor, or a copy)
    TensorRecord record;  // shape, step, hf_transposed and the piece, its file and CRC to fill
  };

 private:
  void agree(const std::string& failure);

  std::filesystem::path dir_, tmp_;
  bool main_ = false, full_ = false;
  std::string what_, kept_;  // message prefix; what a failed save leaves
  Manifest run_;             // rank 0: the run as it was at start
  std::vector<Item> items_;
  std::string shard_file_;  // what items_ go into
  bool inject_kill_ = false, inject_fail_ = false, inject_hold_ = false;  // test hook, see save.cpp
  // FULL_STATE_DICT, rank 0 with snapshot: the file's layout and the gathered parameters, copied.
  std::unique_ptr<FullModelLayout> full_layout_;
  std::vector<std::pair<std::string, Tensor>> full_copy_;
  bool snapshot_ = false;
  std::promise<void> copied_;  // snapshot: set once items_ hold copies (or the copy failed)
  Manifest part_;  // what this rank wrote
  std::exception_ptr error_;
};

}  // namespace acc::checkpoint
