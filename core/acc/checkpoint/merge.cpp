// merge_weights: a checkpoint's parameters, wherever their pieces are, into one Hugging Face
// safetensors file, one tensor in memory at a time.
#include "acc/checkpoint/checkpoint.h"
#include "acc/checkpoint/manifest.h"
#include "acc/checkpoint/piece_reader.h"
#include "acc/io/safetensors.h"
#include "acc/ops/ops.h"
#include "acc/util/error.h"

namespace acc::checkpoint {

void merge_weights(const std::filesystem::path& named, const std::filesystem::path& out, DType dtype) {
  ACC_CHECK(dtype == DType::f32 || dtype == DType::bf16, "merge_weights: --dtype must be f32 or "
            "bf16, got ", dtype_name(dtype));
  const std::filesystem::path dir = resolve_checkpoint(named);
  const Manifest manifest = read_manifest(dir);
  PieceReader pieces(dir, manifest);
  std::vector<std::pair<std::string, const TensorRecord*>> params;
  std::vector<io::SafetensorsEntry> entries;
  for (const auto& [key, rec] : manifest.tensors) {
    if (is_optimizer_key(key)) continue;
    params.emplace_back(key, &rec);
    entries.push_back({key, dtype, rec.hf_transposed ? Shape(rec.shape.rbegin(), rec.shape.rend())
                                                     : rec.shape});
  }
  ACC_CHECK(!params.empty(), "merge_weights: ", dir.string(), " holds no parameters");
  io::SafetensorsWriter writer(out, std::move(entries), {{"format", "pt"}});
  for (const auto& [key, rec] : params) {
    Tensor whole = Tensor::empty(rec->shape);
    int64_t covered = 0;
    std::vector<const PieceRecord*> held;
    for (const auto& piece : rec->pieces) held.push_back(&piece);
    pieces.verify_all(held);
    for (const SourceRun& run : source_runs(*rec)) {
      pieces.read(*run.piece, run.entry_at, run.count, whole.data<float>() + run.whole_begin);
      covered += run.count;
    }
    ACC_CHECK(covered == whole.numel(), "merge_weights: ", key, " has ", covered, " of its ",
              whole.numel(), " elements in the checkpoint: a shard is missing");
    if (rec->hf_transposed) whole = ops::transpose(whole);
    if (dtype != DType::f32) whole = whole.to(dtype);
    writer.write(key, whole.raw_data());
  }
  writer.finish();
}

}  // namespace acc::checkpoint
