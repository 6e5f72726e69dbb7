#pragma once
// Whether ops record the tape on this thread. NoGradGuard turns recording off for a scope
// (inference, optimizer steps, the no-grad forward of activation checkpointing).
namespace acc::autograd {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// RAII: disables (or, with enabled=true, re-enables) recording until the scope ends.
class NoGradGuard {
 public:
  explicit NoGradGuard(bool enabled = false);
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace acc::autograd
