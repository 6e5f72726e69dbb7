#pragma once
// Training checkpoints: everything a run needs to continue — model, optimizer state, LR
// schedule, the loop's position in the data, the config — in one directory per step.
//
//   checkpoints/step_000100/manifest.json               what is where (written last, by rank 0)
//   checkpoints/step_000100/shard-00000-of-00002.safetensors   rank 0's pieces
//   checkpoints/step_000100/shard-00001-of-00002.safetensors   rank 1's pieces
//   checkpoints/step_000100/model.safetensors           FULL_STATE_DICT only: the whole model
//   checkpoints/latest                                  "step_000100"
//
// SHARDED_STATE_DICT (the default): every rank writes only the pieces it holds, in parallel;
// no rank gathers the model. FULL_STATE_DICT: the model goes to one model.safetensors with
// Hugging Face names and layout (it opens in transformers), gathered one FSDP unit at a time;
// the optimizer state stays sharded. The manifest records every tensor's shape and, per piece,
// the file, element range and CRC-32, so a checkpoint loads at any world size and under any
// strategy: each rank reads only the ranges it now holds. docs/checkpoints.md has the format.
//
// A step directory is written as step_X.tmp/, every file fsynced, and renamed only once every
// rank has finished; `latest` is replaced atomically after. A failure on any rank (a full disk)
// is an error on every rank and leaves the previous checkpoint as it was. Loading checks the
// manifest against the model and every checksum before it changes anything. save_async writes
// on a background thread from a host copy of the state, so training goes on meanwhile.
#include <cstdint>
#include <filesystem>
#include <optional>

#include "acc/strategy/sharded_model.h"
#include "acc/config/config.h"
#include "acc/optim/lr_schedule.h"
#include "acc/optim/optimizer.h"

namespace acc::checkpoint {

// Where the training loop is: optimizer steps done, the loader's epoch and the batches of that
// epoch already consumed. A resumed run continues with loader.set_epoch(epoch) and
// loader.begin_at(batch): the same batches the uninterrupted run would have seen.
struct Position {
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t batch = 0;
};

// What a checkpoint saves and restores. The model is required; the rest is optional.
struct TrainingState {
  ShardedModel* model = nullptr;
  optim::Optimizer* optimizer = nullptr;  // built on model->param_groups() or parameters()
  optim::LRScheduler* scheduler = nullptr;
  const Config* config = nullptr;  // saved for reference; its state_dict_type picks the format
  Position position;
};

// Writes `dir` completely or not at all (see above). A collective: every rank calls it.
void save_state(const std::filesystem::path& dir, const TrainingState& state);

// Restores the model, optimizer and scheduler from `dir` and returns the saved position
// (also stored in state.position). Any problem — a missing or altered file, another model, a
// newer format — is one acc::Error on every rank, with nothing changed. A collective.
Position load_state(const std::filesystem::path& dir, TrainingState& state);

// Consolidates the parameters of checkpoint `dir` into one safetensors file with Hugging Face
// names and layout (what `accelerate merge-weights` does), in `dtype` (f32 or bf16), checking
// every checksum. Streams: at most one tensor is in memory. Needs no model and no ranks.
void merge_weights(const std::filesystem::path& dir, const std::filesystem::path& out,
                   DType dtype = DType::f32);

// --- a directory of checkpoints, as the training programs keep them ---
// root/step_%06d for state.position.step, then root/latest; with keep > 0 only the newest
// `keep` step directories stay. Returns the step directory. A collective.
std::filesystem::path save_checkpoint(const std::filesystem::path& root, const TrainingState& state,
                                      int keep = 0);
// save_checkpoint without stopping training for the writing: blocks only while this rank copies
// its part of the state to host memory (memory::Category::checkpoint; state in the file tier is
// copied within the file tier), then writes, checksums and fsyncs it on a thread of its own.
// The copy is freed when the write ends. The save becomes root/latest only when every rank's
// write has finished, agreed at the next save, load, finish_saves() or acc::shutdown(): a crash
// during the write leaves the previous checkpoint as latest. Waits for (and commits) the save
// before it. Returns the step directory it will be. A collective.
std::filesystem::path save_async(const std::filesystem::path& root, const TrainingState& state,
                                 int keep = 0);
// Waits for the asynchronous save still being written, if any, and commits it (root/latest
// names it), or raises its error on every rank, saying what latest still names. Returns the
// committed step directory. A collective; save_checkpoint, save_state and load_state call it.
std::optional<std::filesystem::path> finish_saves();
// The directory root/latest names, when there is one.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& root);
// Where to resume from in root: the latest checkpoint, else (latest deleted, or lost with its
// disk) the newest step directory that holds a finished save, said in a warning; else none.
// A collective: what rank 0 finds is every rank's answer, so that the ranks resume from one
// checkpoint (or none does) even while a save moves `latest` or a machine sees root late.
std::optional<std::filesystem::path> resumable_checkpoint(const std::filesystem::path& root);
// Where a checkpoint named by a user is: a step directory as it is; a root (holding `latest`)
// or its `latest` file: the step directory that file names. load_state and merge_weights
// accept all three.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path);

}  // namespace acc::checkpoint
