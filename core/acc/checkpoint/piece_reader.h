#pragma once
// Reading a checkpoint's pieces: each file opened once and its size checked against the
// manifest, each entry checked against its CRC-32 before it is trusted, element ranges read
// straight into their destination. Internal to acc::checkpoint (load_state, merge_weights).
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "acc/checkpoint/manifest.h"
#include "acc/io/safetensors.h"

namespace acc::checkpoint {

// manifest.json of `dir`, parsed; an unfinished save (no manifest) is an error saying so.
Manifest read_manifest(const std::filesystem::path& dir);

// Elements [whole_begin, whole_begin + count) of a tensor, held contiguously by `piece`'s entry
// from its element `entry_at` on (in the tensor's own layout for a transposed entry).
struct SourceRun {
  const PieceRecord* piece = nullptr;
  int64_t whole_begin = 0, count = 0, entry_at = 0;
};
// The runs of all of a tensor's pieces, ordered by whole_begin.
std::vector<SourceRun> source_runs(const TensorRecord& rec);

class PieceReader {
 public:
  PieceReader(std::filesystem::path dir, const Manifest& manifest)
      : dir_(std::move(dir)), manifest_(manifest) {}

  // Reads each piece's entry once, in chunks (at most 16 MB held per thread), and compares its
  // checksum; the pieces over the thread pool, the files opened first, in order. An entry
  // already checked is not read again. The first failure in the pieces' order is thrown.
  void verify_all(const std::vector<const PieceRecord*>& pieces);
  // Elements [entry_at, entry_at + count) of the piece's entry to dst (f32, the tensor's own
  // layout: of a transposed entry, the rows the reads cross are turned back, and kept for the
  // next read of the same entry).
  void read(const PieceRecord& piece, int64_t entry_at, int64_t count, float* dst);
  // Announces a read() of [entry_at, entry_at + count) of a transposed piece, so that the first
  // read turns back every row the announced reads cross, once (default: the rows of each read).
  void will_read(const PieceRecord& piece, int64_t entry_at, int64_t count);

 private:
  const io::SafetensorsReader& reader(const std::string& file);
  // The checksum comparison of one piece, on a reader already open: safe on several threads.
  void check_crc(const io::SafetensorsReader& r, const PieceRecord& piece) const;

  std::filesystem::path dir_;
  const Manifest& manifest_;
  std::map<std::string, io::SafetensorsReader> readers_;
  std::set<std::string> verified_;
  std::map<const PieceRecord*, std::pair<int64_t, int64_t>> announced_;  // [begin, end) per piece
  const PieceRecord* turned_piece_ = nullptr;
  int64_t turned_from_ = 0;  // first element of turned_piece_'s entry that turned_ holds
  Tensor turned_;            // whole rows of turned_piece_'s entry, in the tensor's own layout
};

}  // namespace acc::checkpoint
