// A user project: builds against an installed acc and uses a tensor and the allocator report.
#include <acc/memory/allocator.h>
#include <acc/tensor/tensor.h>

#include <iostream>

int main() {
  acc::Tensor t = acc::Tensor::full({4, 4}, 2.0);
  const auto used = acc::memory::report().total.current;
  if (t.to_vector()[5] != 2.0f || used < 64) return 1;
  std::cout << "consumer: ok (" << t.describe() << ")\n";
  return 0;
}
