#pragma once
// pipeline_config: the PIPELINE strategy's option section, and its values as the strategy uses
// them.
#include <string>
#include <vector>

#include "acc/config/config.h"
#include "acc/config/option_section.h"
#include "schedule.h"
#include "stages.h"

namespace acc::pipeline {

inline constexpr const char* kStrategy = "PIPELINE";
inline constexpr const char* kSection = "pipeline_config";

OptionSection option_section();

struct PipelineOptions {
  Schedule schedule = Schedule::one_f_one_b;
  int stages = 0;  // 0: one per rank (per tensor_parallel ranks)
  int tensor_parallel = 1;  // ranks a stage's layers are split over
  int stages_per_rank = 1;  // chunks of the model per rank (interleaved_1F1B)
  int microbatches = 4;
  std::vector<std::string> split_points{};  // layer names where a stage begins; ["auto"]: balanced
  bool activation_checkpointing = false;
  bool bf16 = false;  // config.compute.bf16
};
PipelineOptions read_options(const Config& config);

// The grid a job of `processes` ranks runs `o` on, as its rank `rank` sees it, checked as the
// strategy checks it when it starts: the stages and tensor-parallel ranks divide the processes,
// stages_per_rank and the schedule agree, the schedule takes the microbatches, a step's messages
// fit their tags. `accelerate config validate` and launch call it with num_processes, so that they
// refuse what the ranks would. Errors name the pipeline_config key.
StageGrid checked_grid(const PipelineOptions& o, int processes, int rank = 0);
// The microbatches must divide the `rows` each of `replicas` pipeline replicas gets of a batch.
void check_microbatches(int64_t rows, int microbatches, int replicas);

}  // namespace acc::pipeline
