#pragma once
// The mesh axes by name: spmd_config.axis_names and the rules files use them (torchprime's
// `tensor` is read as `model`), and the pieces' placements name them (the pipeline's
// tensor-parallel ranks are its `model` axis).
#include <string>

namespace acc::parallel {

inline const std::string kFsdpAxis = "fsdp";          // data parallel, FSDP over the engine
inline const std::string kModelAxis = "model";        // tensor parallel
inline const std::string kTensorAxisAlias = "tensor";  // torchprime's name for `model`

// An axis as the engine names it: `tensor` is `model`.
inline std::string engine_axis(const std::string& axis) { return axis == kTensorAxisAlias ? kModelAxis : axis; }

}  // namespace acc::parallel
