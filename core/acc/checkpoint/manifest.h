#pragma once
// manifest.json of a checkpoint directory: every tensor of the checkpoint (parameters under
// their Hugging Face names, optimizer state as "optimizer.<state>.<parameter>") with its whole
// shape and the pieces that hold it — file, entry, element range of the flattened tensor,
// CRC-32 — plus the files' sizes and the training position. Internal to acc::checkpoint.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "acc/checkpoint/checkpoint.h"

namespace acc::checkpoint {

// Version 2 added pieces that are slices (`slice`); a checkpoint without any is written as
// version 1, which older readers take.
inline constexpr int kFormatVersion = 2;
inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kFullModelFile = "model.safetensors";

struct PieceRecord {
  std::string file;   // in the checkpoint directory
  std::string entry;  // the safetensors entry holding it
  int64_t begin = 0;  // first element of the flattened tensor, or of the flattened slice
  int64_t count = 0;
  uint32_t crc32 = 0;  // of the entry's bytes
  // The entry is the whole tensor stored transposed (Hugging Face's Conv1D layout, [in, out]).
  bool transposed = false;
  // The piece is a range of this slice of the tensor (a tensor-parallel rank's part).
  std::optional<ShardedModel::DimSlice> slice = std::nullopt;
};

struct TensorRecord {
  Shape shape;
  // A parameter Hugging Face files store transposed (Conv1D, [in, out]): merge-weights writes
  // it that way.
  bool hf_transposed = false;
  std::optional<int64_t> step;  // optimizer state: the steps its parameter has taken
  std::vector<PieceRecord> pieces;
};

struct Manifest {
  int version = 1;  // as read; to_json() writes the lowest version that holds what it writes
  std::string model;            // the model's type name
  std::string strategy;         // what saved it, for messages
  std::string state_dict_type;  // SHARDED_STATE_DICT or FULL_STATE_DICT
  int world_size = 1;
  Position position;
  std::string optimizer;  // empty: none saved
  int64_t optimizer_steps = 0;
  std::vector<std::string> optimizer_state_names;
  std::optional<int64_t> scheduler_step;
  std::string config_yaml;
  std::map<std::string, uint64_t> files;  // name -> size in bytes
  std::map<std::string, TensorRecord> tensors;

  std::string to_json() const;
  // Parses and checks the structure; `where` names the file in messages. A newer version is an
  // error saying which acc it needs.
  static Manifest parse(const std::string& json, const std::string& where);
};

// The file rank `rank` of `world` writes a sharded checkpoint's pieces into.
std::string shard_file_name(int rank, int world);

// The key of a parameter's optimizer state tensor.
std::string optimizer_key(const std::string& state_name, const std::string& parameter);
bool is_optimizer_key(const std::string& key);

}  // namespace acc::checkpoint
