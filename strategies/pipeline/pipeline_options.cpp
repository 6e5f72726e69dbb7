#include "pipeline_options.h"

#include "acc/util/error.h"

namespace acc::pipeline {

OptionSection option_section() {
  using T = OptionType;
  return {
      .name = kSection,
      .strategies = {kStrategy},
      .options =
          {
              {.key = "schedule", .type = T::choice, .default_value = "1F1B", .allowed = schedule_names(),
               .help = "order of each stage's microbatch forwards and backwards: GPipe (all forwards, then all "
                       "backwards), 1F1B (one forward, one backward: fewer activations held), interleaved_1F1B "
                       "(1F1B over stages_per_rank chunks per rank: a smaller bubble), zero_bubble (1F1B with "
                       "each backward's weight gradients put off to fill its waits)",
               .question = "Pipeline schedule?"},
              {.key = "stages", .type = T::integer, .default_value = "0", .min = 0,
               .help = "pipeline stages (0: one per process, or per tensor_parallel processes); with fewer, each "
                       "stage runs on processes / (stages x tensor_parallel) replicas that see different data and "
                       "shard the stage's parameters (pipeline x fsdp)",
               .question = "Pipeline: stages (0: one per process)?"},
              {.key = "tensor_parallel", .type = T::integer, .default_value = "1", .min = 1,
               .help = "ranks each stage's layers are split over by tensor parallelism (attention heads, MLP "
                       "units and the vocabulary of the embedding and head, as Megatron-LM splits them); processes "
                       "= stages x replicas x tensor_parallel, a stage's tensor-parallel ranks neighbours",
               .question = "Pipeline: tensor-parallel ranks per stage (1: none)?"},
              {.key = "stages_per_rank", .type = T::integer, .default_value = "1", .min = 1,
               .help = "chunks of the model each pipeline rank holds (virtual stages c * stages + rank); 2 or more "
                       "with schedule interleaved_1F1B",
               .question = "Pipeline: stages per rank (2+ for interleaved_1F1B)?"},
              {.key = "microbatches", .type = T::integer, .default_value = "4", .min = 1,
               .help = "microbatches each batch is cut into (by rows; must divide the batch): more shrink the "
                       "bubble, (stages - 1) / (microbatches + stages - 1) of a step (at most 15000 / stages)",
               .question = "Pipeline: microbatches per batch?"},
              {.key = "split_points", .type = T::name_list, .default_value = "auto",
               .help = "auto (whole layers, stages balanced by the products each computes per token), or the "
                       "names where each stage after the first begins: a layer (transformer.h.6) or a layer's MLP "
                       "half (transformer.h.6.mlp)",
               .question = "Pipeline: split points (auto, or names where a stage begins)?"},
              {.key = "activation_checkpointing", .type = T::boolean, .default_value = "false",
               .help = "each stage keeps only its input per microbatch in flight and runs its forward again in "
                       "the backward",
               .question = "Pipeline: activation checkpointing (recompute each stage's forward in backward)?"},
          },
      // A model made by acc::make_model gets no parameter memory: each stage makes its own.
      .deferred_init = [](const Config&) { return true; },
  };
}

PipelineOptions read_options(const Config& config) {
  const OptionValues v = config.section(kSection);
  return {.schedule = parse_schedule(v.text("schedule")),
          .stages = static_cast<int>(v.integer("stages")),
          .tensor_parallel = static_cast<int>(v.integer("tensor_parallel")),
          .stages_per_rank = static_cast<int>(v.integer("stages_per_rank")),
          .microbatches = static_cast<int>(v.integer("microbatches")),
          .split_points = v.texts("split_points"),
          .activation_checkpointing = v.boolean("activation_checkpointing"),
          .bf16 = config.compute.bf16};
}

StageGrid checked_grid(const PipelineOptions& o, int processes, int rank) {
  const StageGrid grid = stage_grid(o.stages, o.tensor_parallel, processes, rank);
  const int chunks = o.stages_per_rank;
  ACC_CHECK(chunks == 1 || grid.stages > 1, "pipeline_config.stages_per_rank: ", chunks, " chunks on a pipeline "
            "of one rank would only send to itself; interleaving needs 2 or more stages");
  stage_actions(o.schedule, grid.stage, grid.stages, o.microbatches, chunks);  // the schedule's own errors
  const int virtual_stages = grid.stages * chunks;
  ACC_CHECK(2 * virtual_stages * o.microbatches <= kEvaluationTag, "pipeline_config.microbatches: ", o.microbatches,
            " microbatches through ", virtual_stages, " stages are more messages per step than the tags can tell "
            "apart; use at most ", kEvaluationTag / (2 * virtual_stages));
  return grid;
}

void check_microbatches(int64_t rows, int microbatches, int replicas) {
  // Each replica cuts its own share of the global batch.
  ACC_CHECK(rows % microbatches == 0, "pipeline_config.microbatches: ", microbatches,
            " microbatches do not divide the batch of ", rows, " rows",
            replicas > 1 ? " each of the " + std::to_string(replicas) + " pipeline replicas gets" : "", "; use a ",
            replicas > 1 ? "global " : "", "batch size that is a multiple of ", int64_t{microbatches} * replicas,
            " or a number of microbatches that divides ", rows);
}

}  // namespace acc::pipeline
