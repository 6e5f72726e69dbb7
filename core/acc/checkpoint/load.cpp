// load_state: every rank plans the element ranges it needs from whichever files hold them,
// verifies those files (sizes, checksums) and the manifest against its model, and only once
// every rank has found nothing wrong does any rank change its state (but for a resume's
// parameters, read in place). The checksums are shared out (SharedCheck): what the ranks read
// while checking, they sum on the way, so those bytes come off the disk once.
#include <algorithm>
#include <map>
#include <string>

#include "acc/autograd/grad_mode.h"
#include "acc/checkpoint/blocks.h"
#include "acc/checkpoint/checkpoint.h"
#include "acc/checkpoint/layout.h"
#include "acc/checkpoint/manifest.h"
#include "acc/checkpoint/piece_reader.h"
#include "acc/checkpoint/shared_check.h"
#include "acc/distributed/agreement.h"
#include "acc/memory/prefault.h"
#include "acc/models/checkpoint.h"
#include "acc/runtime/init.h"
#include "acc/util/activity.h"
#include "acc/util/error.h"

namespace acc::checkpoint {

namespace {

// The checkpoint's parameters must be the model's: same names, same whole shapes.
void check_same_model(const Manifest& manifest, const ShardedModel& sharded) {
  std::map<std::string, Shape> params;
  for (const auto& [name, shape] : sharded.whole_parameter_shapes()) params[name] = shape;
  models::LoadProblems problems;
  for (const auto& [key, rec] : manifest.tensors) {
    if (is_optimizer_key(key)) continue;
    const auto it = params.find(key);
    if (it == params.end())
      problems.unexpected.push_back(key);
    else if (it->second != rec.shape)
      problems.mismatched.push_back(key + ": checkpoint " + shape_str(rec.shape) + ", model " +
                                    shape_str(it->second));
  }
  for (const auto& [name, shape] : params)
    if (!manifest.tensors.count(name)) problems.missing.push_back(name);
  ACC_CHECK(problems.empty(), "the checkpoint holds a ", manifest.model, " that differs from this ",
            sharded.module().type_name(), problems.describe("the checkpoint"));
}

// One destination range and the piece parts that fill it.
struct Read {
  const PieceRecord* piece;
  int64_t entry_at = 0, count = 0;  // elements of the piece's entry
  int64_t at = 0;                   // offset into the destination
};
struct Target {
  Tensor dst;  // f32, contiguous; bound once loading is certain for optimizer state
  // Read while the files are checked (else once every check has passed): a new tensor, not
  // yet the optimizer's, or a parameter read in place by a resume.
  bool early = false;
  bool fresh = false;  // dst is new memory, faulted in ahead of the reads
  std::vector<Read> reads;
};

// Reads filling this rank's piece of `key` (`piece` names its range and slice) from whatever
// pieces the checkpoint holds, sliced or not.
Target plan_target(const Manifest& manifest, const std::string& key,
                   const ShardedModel::ParameterPiece& piece) {
  const TensorRecord& rec = manifest.tensors.at(key);
  const auto sources = source_runs(rec);
  const int64_t count = piece.master.numel();
  Target t;
  int64_t covered = 0;
  for (const auto& want : ShardedModel::whole_runs(rec.shape, piece.slice, piece.begin, count)) {
    const int64_t end = want.whole_begin + want.count;
    // The first source run ending after want.whole_begin; runs never overlap (one writer each).
    auto it = std::upper_bound(sources.begin(), sources.end(), want.whole_begin,
                               [](int64_t at, const SourceRun& s) { return at < s.whole_begin + s.count; });
    for (; it != sources.end() && it->whole_begin < end; ++it) {
      const int64_t lo = std::max(want.whole_begin, it->whole_begin);
      const int64_t hi = std::min(end, it->whole_begin + it->count);
      t.reads.push_back({it->piece, it->entry_at + (lo - it->whole_begin), hi - lo,
                         want.offset + (lo - want.whole_begin)});
      covered += hi - lo;
    }
  }
  ACC_CHECK(covered == count, key, ": elements [", piece.begin, ", ", piece.begin + count, ") of ",
            piece.slice ? "this rank's slice" : "the tensor",
            covered < count ? " are in none of the checkpoint's files (" : " are saved more than once (", covered,
            " of ", count, " found): ", covered < count ? "a shard is missing" : "the checkpoint's pieces overlap");
  return t;
}

struct Plan {
  std::vector<Target> params;
  // An optimizer parameter's state: its slot, the steps it had taken and one target per state
  // tensor (no step: nothing was saved, it had not been stepped).
  struct StateFill {
    OptimizerSlot slot;
    std::optional<int64_t> step;
    std::vector<Target> tensors;
  };
  std::vector<StateFill> states;
  std::vector<std::pair<Tensor, Tensor>> compute_copies;  // (copy, master), refilled after loading

  template <class F>
  void for_each_target(F f) {
    for (auto& t : params) f(t);
    for (auto& s : states)
      for (auto& t : s.tensors) f(t);
  }
  // The reads done while the files are checked, or of the others.
  std::vector<PieceReader::Read> reads(bool early) {
    std::vector<PieceReader::Read> out;
    for_each_target([&](Target& t) {
      if (t.early == early)
        for (const auto& r : t.reads) out.push_back({r.piece, r.entry_at, r.count, t.dst.data<float>() + r.at, t.dst.storage()->tier()});
    });
    return out;
  }
};

// `params_in_place`: the parameters are read while the files are checked (a resume).
Plan plan_load(const Manifest& manifest, const TrainingState& state, bool params_in_place) {
  Plan plan;
  const auto pieces = state.model->parameter_pieces();
  for (const auto& piece : pieces) {
    Target t = plan_target(manifest, piece.name, piece);
    t.dst = piece.master;
    // A resume reads the parameters into place while it checks the files: reading them again
    // after the checks cost GPT-2 small's FULL load at one rank a quarter of its time, and a
    // staging copy in new memory more (its first touch). A file-tier master is read through
    // its file after the checks.
    t.early = params_in_place && piece.master.storage()->tier() != memory::Tier::file;
    plan.params.push_back(std::move(t));
    if (piece.compute.defined()) plan.compute_copies.emplace_back(piece.compute, piece.master);
  }
  const optim::Optimizer* opt = state.optimizer;
  if (!opt) return plan;
  ACC_CHECK(!manifest.optimizer.empty(), "the checkpoint has no optimizer state; load it without "
            "an optimizer (TrainingState.optimizer = nullptr) to restore the model alone");
  ACC_CHECK(manifest.optimizer == opt->name() && manifest.optimizer_state_names == opt->state_names(),
            "the checkpoint's optimizer is ", manifest.optimizer, ", this run's is ", opt->name());
  const auto slots = optimizer_slots(opt, pieces);
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!slots[i]) continue;
    Plan::StateFill fill{*slots[i], std::nullopt, {}};
    for (const auto& name : opt->state_names()) {
      const std::string key = optimizer_key(name, pieces[i].name);
      const auto it = manifest.tensors.find(key);
      if (it == manifest.tensors.end()) break;  // not stepped before the save
      fill.step = it->second.step.value_or(manifest.optimizer_steps);
      fill.tensors.push_back(plan_target(manifest, key, pieces[i]));
    }
    if (fill.tensors.size() != opt->state_names().size()) fill = {*slots[i], std::nullopt, {}};
    // A parameter with no state yet (a load before the first step, the usual case) gets its
    // state as new tensors, read in the same pass that checks the files: those bytes come off
    // the disk once, and nothing the optimizer holds changes before every check has passed.
    if (fill.step && opt->state(fill.slot.group, fill.slot.index).tensors.empty()) {
      auto fresh = opt->unbound_state(fill.slot.group, fill.slot.index);
      for (size_t k = 0; k < fresh.size(); ++k) {
        fill.tensors[k].dst = std::move(fresh[k]);
        fill.tensors[k].early = fill.tensors[k].fresh = true;
      }
    }
    plan.states.push_back(std::move(fill));
  }
  return plan;
}

// A compute copy (bf16) from its master, 4 MB at a time; a file-tier master read through its
// file (for_each_block), not through its mapping, whose every page would be a fault.
void refill_copy(Tensor& copy, const Tensor& master) {
  Tensor flat = copy.view({copy.numel()});
  for_each_block(master, int64_t{1} << 20,
                 [&](const Tensor& block, int64_t at) { flat.narrow(at, block.numel()).copy_(block); });
}

// The optimizer has not stepped and holds no state: a resume, whose model was only just
// initialised. (The step count is what every rank agrees on; an optimizer without state, SGD
// without momentum, has stepped when it says so.)
bool before_first_step(const optim::Optimizer& opt) {
  if (opt.steps_taken() != 0) return false;
  for (size_t g = 0; g < opt.param_groups().size(); ++g)
    for (size_t i = 0; i < opt.param_groups()[g].params.size(); ++i)
      if (!opt.state(g, i).tensors.empty()) return false;
  return true;
}

// Every piece a load needs intact: all of the checkpoint's, or its parameters' without an
// optimizer. The same list on every rank.
std::vector<const PieceRecord*> needed_pieces(const Manifest& manifest, bool with_optimizer) {
  std::vector<const PieceRecord*> out;
  for (const auto& [key, rec] : manifest.tensors) {
    if (!with_optimizer && is_optimizer_key(key)) continue;
    for (const auto& piece : rec.pieces) out.push_back(&piece);
  }
  return out;
}

// The fresh targets' memory in the order the checks of `checked` fill it (the reads beside the
// checks last, in their order): faulted in on a second thread while the reads wait on the
// disk. File-tier targets are left alone (faulting them in would read their files).
std::vector<memory::Prefault::Region> fresh_memory(Plan& plan, const std::vector<const PieceRecord*>& checked) {
  std::map<const PieceRecord*, size_t> order;
  for (size_t i = 0; i < checked.size(); ++i) order[checked[i]] = i;
  std::vector<std::pair<size_t, memory::Prefault::Region>> regions;
  plan.for_each_target([&](Target& t) {
    if (!t.fresh || t.dst.storage()->tier() == memory::Tier::file) return;
    for (const auto& r : t.reads) {
      const auto it = order.find(r.piece);
      regions.push_back({it == order.end() ? checked.size() : it->second,
                         {t.dst.data<float>() + r.at, static_cast<size_t>(r.count) * sizeof(float)}});
    }
  });
  std::stable_sort(regions.begin(), regions.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<memory::Prefault::Region> out;
  for (const auto& [at, region] : regions) out.push_back(region);
  return out;
}

// Every rank must load the same checkpoint: ranks that resolved `latest` on either side of a
// save moving it, or that see different files under one path (nodes with disks of their own),
// would restore different steps (and the checks would compare one rank's bytes with another's
// checksums). Which checkpoint a rank read is its manifest's text (`text_crc`); copies under
// other paths agree. A collective; `read` is null on a rank whose reading failed (it reports
// that itself). Throws on each rank whose checkpoint differs from the first rank's that read one.
void expect_same_checkpoint(dist::ProcessGroup& group, const std::filesystem::path& dir, const Manifest* read,
                            uint32_t text_crc) {
  // "<text_crc>\n<dir> (step <n>)", or empty
  const std::string mine =
      read ? std::to_string(text_crc) + '\n' + dir.string() + " (step " + std::to_string(read->position.step) + ")"
           : std::string();
  const auto all = dist::all_gather_strings(group, mine);
  const auto first = std::find_if(all.begin(), all.end(), [](const std::string& s) { return !s.empty(); });
  auto crc_of = [](const std::string& s) { return s.substr(0, s.find('\n')); };
  auto description_of = [](const std::string& s) { return s.substr(s.find('\n') + 1); };
  if (mine.empty() || crc_of(mine) == crc_of(*first)) return;
  ACC_FAIL("the ranks read different checkpoints: ", description_of(mine), " here, ", description_of(*first),
           " on rank ", first - all.begin(), "; every rank must load the same one (a save moved `latest` while "
           "the ranks looked it up, or the ranks see different files under that path)");
}

}  // namespace

Position load_state(const std::filesystem::path& named, TrainingState& state) {
  finish_saves();  // an asynchronous save of this run may be the one to load
  activity::Phase phase("checkpoint load");
  ACC_CHECK(state.model != nullptr, "load_state: TrainingState.model is required");
  autograd::NoGradGuard no_grad;
  auto& group = world();
  // Resolved inside the first try: a `latest` naming a directory this rank cannot see yet is
  // its error, reported with every rank's, not a rank missing from the collectives.
  std::filesystem::path dir = named;
  std::exception_ptr error;
  Manifest manifest;
  Plan plan;
  std::optional<PieceReader> files;
  std::vector<PieceReader::Read> early;                // the reads done while checking
  std::vector<std::optional<SharedCheck::Run>> runs;  // per early read, what it can sum
  const bool resume = state.optimizer && before_first_step(*state.optimizer);
  std::vector<const PieceRecord*> needed;
  uint32_t manifest_crc = 0;
  try {
    dir = resolve_checkpoint(named);
    manifest = read_manifest(dir, &manifest_crc);
    check_same_model(manifest, *state.model);
    plan = plan_load(manifest, state, resume);
    files.emplace(dir, manifest);
    needed = needed_pieces(manifest, state.optimizer != nullptr);
    early = plan.reads(true);
    // The files of what this rank reads early, and below of what it checks whole, opened and
    // their sizes and entries checked before any rank reads anything: a missing or truncated
    // file changes nothing, a resume's parameters included. (Each rank opens only those: a
    // job of many ranks does not open every shard file on every rank.)
    std::vector<const PieceRecord*> early_pieces;
    for (const auto& read : early) early_pieces.push_back(read.piece);
    files->open(early_pieces);
    for (const auto& read : early) {
      const auto range = files->summed_range(read);
      runs.push_back(range ? std::optional<SharedCheck::Run>({read.piece, range->first, range->second}) : std::nullopt);
    }
  } catch (...) {
    error = std::current_exception();
  }
  try {
    expect_same_checkpoint(group, dir, error ? nullptr : &manifest, manifest_crc);
  } catch (...) {
    if (!error) error = std::current_exception();
  }
  const std::string what = "load_state " + dir.string() + ": ";
  dist::raise_if_any_failed(group, what + "nothing was loaded", error);
  const SharedCheck check(group, needed, runs);
  try {
    files->open(check.whole());
  } catch (...) {
    error = std::current_exception();
  }
  dist::raise_if_any_failed(group, what + "nothing was loaded", error);
  std::vector<uint32_t> sums;
  try {
    memory::Prefault prefault(fresh_memory(plan, check.whole()));
    sums = files->verify_all(check.whole(), early, check.summed());
  } catch (...) {
    error = std::current_exception();
  }
  sums.resize(early.size());
  try {
    check.compare(group, sums, !error);
  } catch (...) {
    error = std::current_exception();
  }
  bool in_place = false;  // parameters were read while checking
  for (const Target& t : plan.params) in_place = in_place || t.early;
  const char* outcome = in_place ? "the optimizer is as it was, the model's parameters are not (a load before the "
                                   "first optimizer step reads them in place)"
                                 : "nothing was loaded";
  dist::raise_if_any_failed(group, what + outcome, error);

  try {
    for (auto& fill : plan.states) {
      const bool fresh = !fill.tensors.empty() && fill.tensors.front().fresh;
      optim::ParamState& s =
          state.optimizer->restore_state(fill.slot.group, fill.slot.index, fill.step.has_value() && !fresh);
      if (!fill.step) continue;
      s.step = *fill.step;
      for (size_t k = 0; k < fill.tensors.size(); ++k) {
        if (fresh)
          s.tensors.push_back(fill.tensors[k].dst);
        else
          fill.tensors[k].dst = s.tensors[k];
      }
    }
    files->read_all(plan.reads(false));
    for (auto& [copy, master] : plan.compute_copies) refill_copy(copy, master);
    // Offloaded to files (fsdp_offload_dir): pages of the state that earlier work had mapped in
    // leave resident memory again (the load itself wrote through the files).
    plan.for_each_target([](Target& t) { page_out(t.dst); });
    if (state.optimizer) state.optimizer->set_steps_taken(manifest.optimizer_steps);
    if (state.scheduler && manifest.scheduler_step) state.scheduler->apply(*manifest.scheduler_step);
  } catch (...) {
    error = std::current_exception();
  }
  dist::raise_if_any_failed(group, what + "reading failed part way; the model and optimizer are "
                            "in an undefined state", error);
  state.position = manifest.position;
  return manifest.position;
}

}  // namespace acc::checkpoint
