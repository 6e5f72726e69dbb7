#pragma once
// pipeline_config: the PIPELINE strategy's option section, and its values as the strategy uses
// them.
#include <string>
#include <vector>

#include "acc/config/config.h"
#include "acc/config/option_section.h"
#include "schedule.h"

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

}  // namespace acc::pipeline
