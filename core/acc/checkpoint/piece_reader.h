#pragma once
// Reading a checkpoint's pieces: each file opened once and its size checked against the
// manifest, each entry checked against its CRC-32 before it is trusted, element ranges read
// straight into their destination. Internal to acc::checkpoint (load_state, merge_weights).
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "acc/checkpoint/manifest.h"
#include "acc/io/safetensors.h"

namespace acc::checkpoint {

// manifest.json of `dir`, parsed; an unfinished save (no manifest) is an error saying so.
Manifest read_manifest(const std::filesystem::path& dir);

class PieceReader {
 public:
  PieceReader(std::filesystem::path dir, const Manifest& manifest)
      : dir_(std::move(dir)), manifest_(manifest) {}

  // Reads the piece's entry once, in chunks (at most 16 MB held), and compares its checksum.
  void verify(const PieceRecord& piece);
  // Elements [from, from + count) of the tensor, which must lie inside the piece, to dst (f32,
  // the tensor's own layout).
  void read(const PieceRecord& piece, int64_t from, int64_t count, float* dst);

 private:
  const io::SafetensorsReader& reader(const std::string& file);

  std::filesystem::path dir_;
  const Manifest& manifest_;
  std::map<std::string, io::SafetensorsReader> readers_;
  std::set<std::string> verified_;
};

}  // namespace acc::checkpoint
