#include "acc/autograd/grad_mode.h"

namespace acc::autograd {

namespace {
thread_local bool t_grad_enabled = true;
}

bool GradMode::is_enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool enabled) { t_grad_enabled = enabled; }

NoGradGuard::NoGradGuard(bool enabled) : previous_(t_grad_enabled) { t_grad_enabled = enabled; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

}  // namespace acc::autograd
