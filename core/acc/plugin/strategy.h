#pragma once
// acc::Strategy: how a model is spread over ranks (FSDP's five settings, SPMD, a third party's
// own). Strategies live in plugins and are made by name through the plugin registry; they talk
// to other ranks only through acc::dist::ProcessGroup, never MPI.
//
// This is the minimal seam. The FSDP issue extends it with the model-facing calls (wrapping a
// model's units into flat sharded buffers, the data-parallel rank/size for the loader, hooks
// at unit boundaries); add them here as virtual functions so every strategy plugin gets them.
#include <memory>
#include <string>

#include "acc/dist/process_group.h"

namespace acc {

class Strategy {
 public:
  virtual ~Strategy() = default;
  // The name it is registered and chosen under, e.g. "fsdp".
  virtual std::string name() const = 0;
  // Called once before use with the group the strategy spreads the model over.
  virtual void setup(std::shared_ptr<dist::ProcessGroup> group) { group_ = std::move(group); }
  const std::shared_ptr<dist::ProcessGroup>& group() const { return group_; }

 private:
  std::shared_ptr<dist::ProcessGroup> group_;
};

}  // namespace acc
