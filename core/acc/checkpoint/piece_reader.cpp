#include "acc/checkpoint/piece_reader.h"

#include <algorithm>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string_view>
#include <tuple>
#include <vector>

#include <tbb/parallel_for.h>

#include "acc/checkpoint/layout.h"
#include "acc/kernels/transpose.h"
#include "acc/memory/allocator.h"
#include "acc/tensor/tensor.h"
#include "acc/util/error.h"

namespace acc::checkpoint {

Manifest read_manifest(const std::filesystem::path& dir, uint32_t* text_crc) {
  const auto path = dir / kManifestFile;
  ACC_CHECK(std::filesystem::is_directory(dir), "no checkpoint directory ", dir.string());
  ACC_CHECK(std::filesystem::is_regular_file(path), "no ", kManifestFile, " in ", dir.string(),
            ": not a checkpoint, or one whose save did not finish");
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  if (text_crc) *text_crc = io::crc32(json.data(), json.size());
  return Manifest::parse(json, path.string());
}

namespace {

// Elements (16 MB) a check reads at a time, and the longest part of a read on one thread.
constexpr int64_t kChunk = int64_t{4} << 20;

// job(0) ... job(n - 1) over the thread pool; the failure of the lowest index is rethrown, so
// the error is the one a sequential loop would have met first.
void in_parallel(size_t n, const std::function<void(size_t)>& job) {
  std::mutex mutex;
  std::exception_ptr first;
  size_t first_at = n;
  tbb::parallel_for(size_t{0}, n, size_t{1}, [&](size_t i) {
    try {
      job(i);
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

const Shape& stored_matrix(const io::SafetensorsReader& r, const PieceRecord& piece) {
  const Shape& stored = r.entry(piece.entry).shape;
  ACC_CHECK(stored.size() == 2, piece.file, ": \"", piece.entry, "\" is stored transposed but is not 2-d");
  return stored;
}

}  // namespace

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
  const auto& opened = readers_.emplace(file, io::SafetensorsReader(path)).first->second;
  opened.expect_sequential_reads();  // checks and reads go through the files in order
  return opened;
}

void PieceReader::check_entry(const io::SafetensorsReader& r, const PieceRecord& piece) {
  ACC_CHECK(r.contains(piece.entry), piece.file, " has no entry \"", piece.entry, "\"");
  const auto& e = r.entry(piece.entry);
  ACC_CHECK(e.dtype == DType::f32 && e.numel() == piece.count, piece.file, ": \"", piece.entry,
            "\" is ", dtype_name(e.dtype), shape_str(e.shape), ", the manifest says ",
            piece.count, " f32 elements");
}

void PieceReader::open(const std::vector<const PieceRecord*>& pieces) {
  for (const PieceRecord* piece : pieces) check_entry(reader(piece->file), *piece);
}

std::vector<uint32_t> PieceReader::verify_all(const std::vector<const PieceRecord*>& pieces,
                                              const std::vector<Read>& reads, const std::vector<bool>& sum) {
  std::vector<std::pair<const io::SafetensorsReader*, const PieceRecord*>> todo;
  for (const PieceRecord* piece : pieces)
    if (verified_.insert(piece->file + '\n' + piece->entry).second) todo.emplace_back(&reader(piece->file), piece);
  // In file order: the pool splits the list into runs, so each thread reads on through a file
  // and the kernel's readahead keeps ahead of it; in the manifest's order the threads jump
  // about the files (a FULL load of GPT-2 small from a fast disk took 1.5-1.9x longer).
  auto place = [](const auto& job) {  // an entry the file lacks sorts first; its check says so
    const auto& [r, piece] = job;
    return std::tuple(std::string_view(piece->file), r->contains(piece->entry) ? r->entry(piece->entry).begin : 0,
                      std::string_view(piece->entry));
  };
  std::sort(todo.begin(), todo.end(), [&](const auto& a, const auto& b) { return place(a) < place(b); });
  // Each read goes with the check of its piece when there is one here, else beside the checks.
  std::map<const PieceRecord*, size_t> checked_at;
  for (size_t i = 0; i < todo.size(); ++i) checked_at[todo[i].second] = i;
  std::vector<std::vector<Read>> served(todo.size());
  std::vector<Read> rest;
  std::vector<size_t> rest_of;  // the index in `reads` of each of `rest`
  for (size_t i = 0; i < reads.size(); ++i) {
    const auto it = checked_at.find(reads[i].piece);
    if (it != checked_at.end()) {
      served[it->second].push_back(reads[i]);
    } else {
      rest.push_back(reads[i]);
      rest_of.push_back(i);
    }
  }
  const auto others = parts(rest);
  auto wanted = [&](const Part& p) { return rest_of[p.of] < sum.size() && sum[rest_of[p.of]]; };
  std::vector<uint32_t> part_crc(others.size(), 0);
  in_parallel(todo.size() + others.size(), [&](size_t i) {
    if (i < todo.size()) {
      check_crc(*todo[i].first, *todo[i].second, served[i]);
    } else {
      const Part& p = others[i - todo.size()];
      read_part(p.read, wanted(p) ? &part_crc[i - todo.size()] : nullptr);
    }
  });
  // A read's sum from its parts', in order.
  std::vector<uint32_t> crc(reads.size(), 0);
  for (size_t i = 0; i < others.size(); ++i)
    if (wanted(others[i])) {
      uint32_t& c = crc[rest_of[others[i].of]];
      const auto [first, end] = *summed_range(others[i].read);
      c = io::combine_crc32(c, part_crc[i], static_cast<size_t>(end - first) * sizeof(float));
    }
  return crc;
}

std::optional<std::pair<int64_t, int64_t>> PieceReader::summed_range(const Read& read) {
  if (!read.piece->transposed) return std::pair(read.entry_at, read.entry_at + read.count);
  const Shape& stored = stored_matrix(reader(read.piece->file), *read.piece);
  if (!reads_whole_rows(stored[0], stored[1], read.entry_at, read.count)) return std::nullopt;
  return std::pair(int64_t{0}, read.piece->count);
}

namespace {

// Stored rows [j0, j1) of an entry stored transposed ([cols, rows], acc's [rows, cols]), held
// at `block`, `width` elements a stored row starting at stored column `origin`: the part of
// acc's elements [entry_at, end) they hold, written to dst (which holds that range). The acc
// rows wholly inside the range are one transpose of the block; a partial first or last row
// goes element by element.
void scatter_stored_rows(const float* block, int64_t width, int64_t origin, int64_t j0, int64_t j1, int64_t cols,
                         int64_t entry_at, int64_t end, float* dst) {
  const int64_t first = entry_at / cols, last = (end + cols - 1) / cols;
  const int64_t whole_begin = (entry_at + cols - 1) / cols, whole_end = end / cols;
  auto part_of_row = [&](int64_t i) {
    const int64_t lo = std::max(j0, entry_at - i * cols), hi = std::min(j1, end - i * cols);
    const float* in = block + (i - origin);
    float* out = dst + (i * cols - entry_at);
    for (int64_t j = lo; j < hi; ++j) out[j] = in[(j - j0) * width];
  };
  for (int64_t i = first; i < std::min(whole_begin, last); ++i) part_of_row(i);
  if (whole_begin < whole_end)
    kernels::transpose32(block + (whole_begin - origin), width, dst + (whole_begin * cols - entry_at) + j0, cols,
                         j1 - j0, whole_end - whole_begin);
  for (int64_t i = std::max(whole_end, whole_begin); i < last; ++i) part_of_row(i);
}

// Stored rows a transposed block holds so that it stays in cache while being scattered.
int64_t rows_per_block(int64_t width) {
  constexpr int64_t kBlockBytes = 512 << 10;
  return std::clamp<int64_t>(kBlockBytes / (width * static_cast<int64_t>(sizeof(float))), 1, 64);
}

}  // namespace

void PieceReader::check_crc(const io::SafetensorsReader& r, const PieceRecord& piece,
                            const std::vector<Read>& reads) const {
  check_entry(r, piece);
  const auto& e = r.entry(piece.entry);
  // A transposed entry is read in whole stored rows, so that its reads can be turned back.
  const int64_t row = piece.transposed ? stored_matrix(r, piece)[1] : 1;
  const int64_t chunk = std::max<int64_t>(1, kChunk / row) * row;
  const int64_t cols = piece.transposed ? e.shape[0] : 0, block = rows_per_block(row);
  // One whole chunk whatever the piece (a transposed entry's chunk is a whole number of its
  // stored rows, more than kChunk when a row is longer), from the allocator: its cache hands the
  // same blocks back piece after piece, where a buffer of each piece's size would be fresh
  // memory, page-faulted in every time.
  memory::CategoryScope scope(memory::Category::checkpoint);
  const Tensor block_memory = Tensor::empty({std::max(kChunk, chunk)});
  float* buffer = block_memory.data<float>();
  uint32_t crc = 0;
  for (int64_t at = 0; at < piece.count; at += chunk) {
    const int64_t n = std::min(chunk, piece.count - at);
    // A chunk that one read takes whole goes straight to that read's destination (one copy
    // out of the page cache, not two).
    const Read* whole = nullptr;
    for (const Read& read : reads)
      if (!piece.transposed && read.tier != memory::Tier::file && read.entry_at <= at &&
          at + n <= read.entry_at + read.count)
        whole = &read;
    float* const data = whole ? whole->dst + (at - whole->entry_at) : buffer;
    r.read_range_into(piece.entry, at, at + n, data);
    crc = io::crc32(data, static_cast<size_t>(n) * sizeof(float), crc);
    for (const Read& read : reads) {
      const int64_t end = read.entry_at + read.count;
      if (&read == whole) continue;
      if (!piece.transposed) {
        const int64_t lo = std::max(at, read.entry_at), hi = std::min(at + n, end);
        if (lo < hi)
          memory::write_block(read.dst + (lo - read.entry_at), static_cast<size_t>(hi - lo) * sizeof(float),
                              data + (lo - at), read.tier);
        continue;
      }
      for (int64_t j0 = at / row; j0 < (at + n) / row; j0 += block)
        scatter_stored_rows(buffer + (j0 * row - at), row, 0, j0, std::min((at + n) / row, j0 + block), cols,
                            read.entry_at, end, read.dst);
    }
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

void PieceReader::read(const PieceRecord& piece, int64_t entry_at, int64_t count, float* dst, uint32_t* crc) {
  const auto& r = reader(piece.file);
  if (!piece.transposed) {
    r.read_range_into(piece.entry, entry_at, entry_at + count, dst);
    if (crc) *crc = io::crc32(dst, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  const Shape& stored = stored_matrix(r, piece);
  read_transposed(r, piece.entry, stored[0], stored[1], entry_at, count, dst, crc);
}

std::vector<PieceReader::Part> PieceReader::parts(const std::vector<Read>& reads) {
  std::vector<Part> out;
  for (size_t i = 0; i < reads.size(); ++i) {
    const Read& r = reads[i];
    reader(r.piece->file);  // open every file here: the threads only look them up
    const int64_t step = r.piece->transposed ? r.count : kChunk;
    for (int64_t at = 0; at < r.count; at += step)
      out.push_back({{r.piece, r.entry_at + at, std::min(step, r.count - at), r.dst + at, r.tier}, i});
  }
  return out;
}

void PieceReader::read_part(const Read& part, uint32_t* crc) {
  if (part.tier != memory::Tier::file) {
    read(*part.piece, part.entry_at, part.count, part.dst, crc);
    return;
  }
  // Through the file, not the mapping (a transposed entry is turned back in the buffer):
  // reading into the mapped pages faulted each one in, costly on a paravirtualised MMU (as
  // Optimizer::update_streaming found).
  memory::CategoryScope scope(memory::Category::checkpoint);
  const Tensor buffer = Tensor::empty({part.count});
  read(*part.piece, part.entry_at, part.count, buffer.data<float>(), crc);
  memory::write_block(part.dst, static_cast<size_t>(part.count) * sizeof(float), buffer.data<float>(), part.tier);
}

void PieceReader::read_all(const std::vector<Read>& reads) {
  const auto todo = parts(reads);
  in_parallel(todo.size(), [&](size_t i) { read_part(todo[i].read); });
}

bool reads_whole_rows(int64_t cols, int64_t rows, int64_t entry_at, int64_t count) {
  // Whole stored rows when most of each row is needed or the part not needed is short (copying
  // 16 KiB costs about one system call here: a quarter of GPT-2's 768-wide mlp.c_proj took
  // 3072 reads of 768 bytes a block); otherwise one read per stored row of just its columns.
  constexpr int64_t kSkipBytes = 16 << 10;
  const int64_t first = entry_at / cols, last = (entry_at + count + cols - 1) / cols;
  return 2 * (last - first) >= rows || (rows - (last - first)) * static_cast<int64_t>(sizeof(float)) <= kSkipBytes;
}

void read_transposed(const io::SafetensorsReader& r, const std::string& entry, int64_t cols, int64_t rows,
                     int64_t entry_at, int64_t count, float* dst, uint32_t* crc) {
  // acc's element (i, j) of [rows, cols] is the stored (j, i). The range crosses acc's rows
  // [first, last): columns of the stored matrix, read a block of stored rows at a time into a
  // buffer that stays in cache and written out transposed, each acc row's part of the block
  // being contiguous in dst. Whole stored rows in one read per block (reads_whole_rows), so in
  // file order: summed on the way when asked; otherwise one read per stored row of just the
  // columns [first, last).
  const int64_t end = entry_at + count;
  const int64_t first = entry_at / cols, last = (end + cols - 1) / cols;
  const bool whole_rows = reads_whole_rows(cols, rows, entry_at, count);
  ACC_CHECK(!crc || whole_rows, entry, ": a transposed read of parts of stored rows cannot be summed");
  const int64_t width = whole_rows ? rows : last - first;  // elements buffered per stored row
  const int64_t origin = whole_rows ? 0 : first;            // the stored column buffered first
  const int64_t block = rows_per_block(width);
  std::vector<float> buffer(static_cast<size_t>(block * width));
  if (crc) *crc = 0;
  for (int64_t j0 = 0; j0 < cols; j0 += block) {
    const int64_t j1 = std::min(cols, j0 + block);
    if (whole_rows) {
      r.read_range_into(entry, j0 * rows, j1 * rows, buffer.data());
      if (crc) *crc = io::crc32(buffer.data(), static_cast<size_t>((j1 - j0) * rows) * sizeof(float), *crc);
    } else {
      for (int64_t j = j0; j < j1; ++j)
        r.read_range_into(entry, j * rows + first, j * rows + last, buffer.data() + (j - j0) * width);
    }
    scatter_stored_rows(buffer.data(), width, origin, j0, j1, cols, entry_at, end, dst);
  }
}

}  // namespace acc::checkpoint
