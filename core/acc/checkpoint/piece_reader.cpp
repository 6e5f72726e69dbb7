#include "acc/checkpoint/piece_reader.h"

#include <algorithm>
#include <exception>
#include <fstream>
#include <mutex>
#include <sstream>
#include <tuple>
#include <vector>

#include <tbb/parallel_for.h>

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

void PieceReader::verify_all(const std::vector<const PieceRecord*>& pieces) {
  std::vector<std::pair<const io::SafetensorsReader*, const PieceRecord*>> todo;
  for (const PieceRecord* piece : pieces)
    if (verified_.insert(piece->file + '\n' + piece->entry).second) todo.emplace_back(&reader(piece->file), piece);
  std::mutex mutex;
  std::exception_ptr first;  // the first failure in the pieces' order
  size_t first_at = todo.size();
  tbb::parallel_for(size_t{0}, todo.size(), size_t{1}, [&](size_t i) {
    try {
      check_crc(*todo[i].first, *todo[i].second);
    } catch (...) {
      std::lock_guard lock(mutex);
      if (i < first_at) {
        first_at = i;
        first = std::current_exception();
      }
    }
  });
  if (first) std::rethrow_exception(first);
}

void PieceReader::check_crc(const io::SafetensorsReader& r, const PieceRecord& piece) const {
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
    for (const auto& run : ShardedModel::whole_runs(rec.shape, piece.slice, piece.begin, piece.count))
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
  // Stored [in, out] (Hugging Face's Conv1D): the rows [first, last) of acc's [out, in] that the
  // announced reads cross are columns of the stored matrix, read as one run per stored row.
  const bool cached = turned_piece_ == &piece && entry_at >= turned_from_ &&
                      entry_at + count <= turned_from_ + turned_.numel();
  if (!cached) {
    const Shape& stored = r.entry(piece.entry).shape;
    ACC_CHECK(stored.size() == 2, piece.file, ": \"", piece.entry, "\" is stored transposed but is not 2-d");
    const int64_t cols = stored[0], rows = stored[1];  // acc's layout: [rows, cols]
    auto [begin, end] = std::pair{entry_at, entry_at + count};
    if (const auto it = announced_.find(&piece); it != announced_.end())
      std::tie(begin, end) = std::pair{std::min(begin, it->second.first), std::max(end, it->second.second)};
    const int64_t first = begin / cols, last = (end + cols - 1) / cols, n = last - first;
    if (2 * n >= rows) {  // most of each stored row: read and turn back the entry whole
      turned_ = ops::transpose(r.read(piece.entry));
      turned_from_ = 0;
    } else {
      Tensor part = Tensor::empty({cols, n});  // the stored rows, cut to the columns [first, last)
      for (int64_t c = 0; c < cols; ++c)
        r.read_range_into(piece.entry, c * rows + first, c * rows + last, part.data<float>() + c * n);
      turned_ = ops::transpose(part);
      turned_from_ = first * cols;
    }
    turned_piece_ = &piece;
  }
  std::copy_n(turned_.data<float>() + (entry_at - turned_from_), count, dst);
}

void PieceReader::will_read(const PieceRecord& piece, int64_t entry_at, int64_t count) {
  if (!piece.transposed) return;
  const auto [it, added] = announced_.try_emplace(&piece, entry_at, entry_at + count);
  if (!added) it->second = {std::min(it->second.first, entry_at), std::max(it->second.second, entry_at + count)};
}

}  // namespace acc::checkpoint
