#include "acc/nn/containers.h"

#include <string>

namespace acc::nn {

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) : ModuleList() {
  for (const auto& m : modules) append(m);
}

void ModuleList::append(std::shared_ptr<Module> module) {
  register_module(std::to_string(size()), std::move(module));
}

Module& ModuleList::operator[](size_t i) const {
  ACC_CHECK(i < size(), type_name(), ": index ", i, " out of range for ", size(), " modules");
  return *children()[i].second;
}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) : Sequential() {
  for (const auto& m : modules) append(m);
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& [_, child] : children()) h = (*child)(h);
  return h;
}

}  // namespace acc::nn
