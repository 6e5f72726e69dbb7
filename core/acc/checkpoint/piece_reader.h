#pragma once
// Reading a checkpoint's pieces: each file opened once and its size checked against the
// manifest, each entry checked against its CRC-32 before it is trusted, element ranges read
// straight into their destination (through a buffer for the file tier). Internal to
// acc::checkpoint (load_state, merge_weights).
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "acc/checkpoint/manifest.h"
#include "acc/io/safetensors.h"
#include "acc/memory/allocator.h"

namespace acc::checkpoint {

// manifest.json of `dir`, parsed; an unfinished save (no manifest) is an error saying so.
// `text_crc`, if given, receives the CRC-32 of the file's text (which checkpoint it is).
Manifest read_manifest(const std::filesystem::path& dir, uint32_t* text_crc = nullptr);

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

  // Many element ranges read into place (see read()), destinations not overlapping.
  struct Read {
    const PieceRecord* piece = nullptr;
    int64_t entry_at = 0, count = 0;
    float* dst = nullptr;
    // dst's tier: a file-tier destination is written through its file (memory::write_block),
    // not its mapping.
    memory::Tier tier = memory::Tier::compute;
  };
  // Opens the pieces' files and checks each file's size and each piece's entry (present, f32,
  // its element count), reading nothing else: what a load finds wrong before it reads.
  void open(const std::vector<const PieceRecord*>& pieces);
  // Reads each piece's entry once, in chunks (at most 16 MB held per thread), and compares its
  // checksum; the pieces in file order over the thread pool, the files opened first. An entry
  // already checked is not read again. Thrown: a file missing or of the wrong size, else the
  // first failed check in file order, else the first failed read.
  // `reads` are done on the way: those of a piece checked here from the chunks read for its
  // checksum (so those bytes come off the disk once), the others beside the checks. Their
  // destinations hold whatever was read when a check fails (new tensors, or a resume's
  // parameters).
  // Returned: per read, the CRC-32 of the bytes summed_range() names, where `sum` asks for it
  // (a read beside the checks that summed_range() allows), else 0.
  std::vector<uint32_t> verify_all(const std::vector<const PieceRecord*>& pieces,
                                   const std::vector<Read>& reads = {}, const std::vector<bool>& sum = {});
  // The bytes of its entry a read takes in file order, as elements [first, second), when that
  // is one run it can sum on the way: the read's own range, or for a transposed entry read in
  // whole stored rows (read_transposed) the whole entry; else nothing.
  std::optional<std::pair<int64_t, int64_t>> summed_range(const Read& read);
  // Elements [entry_at, entry_at + count) of the piece's entry to dst (f32, the tensor's own
  // layout: of a transposed entry, turned back on the way, read_transposed).
  // With `crc`, also the CRC-32 of summed_range()'s bytes (a read that has one).
  void read(const PieceRecord& piece, int64_t entry_at, int64_t count, float* dst, uint32_t* crc = nullptr);
  // Many read()s over the thread pool, the long ones of untransposed entries cut into 16 MB
  // parts: a load's reads.
  void read_all(const std::vector<Read>& reads);

 private:
  const io::SafetensorsReader& reader(const std::string& file);
  // The piece's entry is in its file as the manifest says (f32, piece.count elements).
  static void check_entry(const io::SafetensorsReader& r, const PieceRecord& piece);
  // The checksum comparison of one piece, on a reader already open, serving `reads` (all of
  // this piece) from its chunks: safe on several threads.
  void check_crc(const io::SafetensorsReader& r, const PieceRecord& piece, const std::vector<Read>& reads) const;
  // `reads` cut into parts of at most 16 MB (a transposed one stays whole), files opened; each
  // part knows the read it is of.
  struct Part {
    Read read;
    size_t of = 0;
  };
  std::vector<Part> parts(const std::vector<Read>& reads);
  // One such part: read(), through a buffer for a file-tier destination.
  void read_part(const Read& part, uint32_t* crc = nullptr);

  std::filesystem::path dir_;
  const Manifest& manifest_;
  std::map<std::string, io::SafetensorsReader> readers_;
  std::set<std::string> verified_;
};

// Elements [entry_at, entry_at + count) of `entry`'s transpose to dst: the entry is stored
// [cols, rows] (Hugging Face's Conv1D, [in, out]), the elements counted in acc's [rows, cols].
// Reads only the stored rows' columns the range crosses (whole stored rows when that is most of
// them, or when what each row's read would skip is at most 16 KiB), through a buffer of at most
// 64 stored rows: no allocation of the matrix's size.
// With `crc` (only for a read that reads_whole_rows()), also the CRC-32 of the whole entry.
void read_transposed(const io::SafetensorsReader& r, const std::string& entry, int64_t cols, int64_t rows,
                     int64_t entry_at, int64_t count, float* dst, uint32_t* crc = nullptr);
// Whether read_transposed reads that range in whole stored rows (all of them).
bool reads_whole_rows(int64_t cols, int64_t rows, int64_t entry_at, int64_t count);

}  // namespace acc::checkpoint
