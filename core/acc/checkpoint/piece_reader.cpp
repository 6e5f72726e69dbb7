#include "acc/checkpoint/piece_reader.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "acc/checkpoint/layout.h"
#include "acc/ops/ops.h"
#include "acc/util/error.h"

namespace acc::checkpoint {

Manifest read_manifest(const std::filesystem::path& dir) {
  const auto path = dir / kManifestFile;
  ACC_CHECK(std::filesystem::is_directory(dir), "no checkpoint directory ", dir.string());
  ACC_CHECK(std::filesystem::is_regular_file(path), "no ", kManifestFile, " in ", dir.string(),
            ": not a checkpoint, or one whose save did not finish");
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return Manifest::parse(text.str(), path.string());
}

const io::SafetensorsReader& PieceReader::reader(const std::string& file) {
  auto it = readers_.find(file);
  if (it != readers_.end()) return it->second;
  const auto path = dir_ / file;
  ACC_CHECK(std::filesystem::is_regular_file(path), file, " is missing from ", dir_.string());
  const auto expected = manifest_.files.find(file);
  ACC_CHECK(expected != manifest_.files.end(), file, " is not listed in the manifest's files");
  const auto size = std::filesystem::file_size(path);
  ACC_CHECK(size == expected->second, file, " has ", size, " bytes, the manifest says ",
            expected->second, " (truncated or replaced)");
  return readers_.emplace(file, io::SafetensorsReader(path)).first->second;
}

void PieceReader::verify(const PieceRecord& piece) {
  if (!verified_.insert(piece.file + '\n' + piece.entry).second) return;
  const auto& r = reader(piece.file);
  ACC_CHECK(r.contains(piece.entry), piece.file, " has no entry \"", piece.entry, "\"");
  const auto& e = r.entry(piece.entry);
  ACC_CHECK(e.dtype == DType::f32 && e.numel() == piece.count, piece.file, ": \"", piece.entry,
            "\" is ", dtype_name(e.dtype), shape_str(e.shape), ", the manifest says ",
            piece.count, " f32 elements");
  constexpr int64_t kChunk = 4 << 20;
  std::vector<float> buffer(static_cast<size_t>(std::min<int64_t>(kChunk, piece.count)));
  uint32_t crc = 0;
  for (int64_t at = 0; at < piece.count; at += kChunk) {
    const int64_t n = std::min(kChunk, piece.count - at);
    r.read_range_into(piece.entry, at, at + n, buffer.data());
    crc = io::crc32(buffer.data(), static_cast<size_t>(n) * sizeof(float), crc);
  }
  ACC_CHECK(crc == piece.crc32, piece.file, ": \"", piece.entry, "\" does not match its checksum "
            "(the file was altered or damaged)");
}

std::vector<SourceRun> source_runs(const TensorRecord& rec) {
  std::vector<SourceRun> out;
  for (const auto& piece : rec.pieces)
    for (const Run& run : whole_runs(rec.shape, piece.slice, piece.begin, piece.count))
      out.push_back({&piece, run.whole_begin, run.count, run.offset});
  std::sort(out.begin(), out.end(),
            [](const SourceRun& a, const SourceRun& b) { return a.whole_begin < b.whole_begin; });
  return out;
}

void PieceReader::read(const PieceRecord& piece, int64_t entry_at, int64_t count, float* dst) {
  const auto& r = reader(piece.file);
  if (!piece.transposed) {
    r.read_range_into(piece.entry, entry_at, entry_at + count, dst);
    return;
  }
  // Stored [in, out] (Hugging Face's Conv1D): the whole tensor, turned back once for all the
  // runs a sliced destination reads of it.
  if (turned_piece_ != &piece) {
    turned_ = ops::transpose(r.read(piece.entry));
    turned_piece_ = &piece;
  }
  std::copy_n(turned_.data<float>() + entry_at, count, dst);
}

}  // namespace acc::checkpoint
