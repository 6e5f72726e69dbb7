#include "acc/distributed/agreement.h"

#include <cstring>

#include "acc/util/error.h"

namespace acc::dist {

std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& mine) {
  const int n = group.size();
  Tensor sizes = Tensor::empty({n}, DType::i64);
  group.all_gather(Tensor::from_vector_i64({static_cast<int64_t>(mine.size())}, {1}), sizes);
  // Strings travel as i32 words (the collectives move whole elements).
  auto words = [](int64_t bytes) { return (bytes + 3) / 4; };
  std::vector<int64_t> counts(n);
  int64_t total = 0;
  for (int r = 0; r < n; ++r) total += counts[r] = words(sizes.data<int64_t>()[r]);
  Tensor packed = Tensor::zeros({std::max<int64_t>(counts[group.rank()], 1)}, DType::i32);
  std::memcpy(packed.raw_data(), mine.data(), mine.size());
  Tensor all = Tensor::empty({std::max<int64_t>(total, 1)}, DType::i32);
  if (total > 0)
    group.all_gather_v(packed.slice_flat(0, {counts[group.rank()]}), all.slice_flat(0, {total}),
                       counts);
  std::vector<std::string> out(n);
  const char* p = static_cast<const char*>(all.raw_data());
  for (int r = 0; r < n; ++r) {
    out[r].assign(p, static_cast<size_t>(sizes.data<int64_t>()[r]));
    p += counts[r] * 4;
  }
  return out;
}

void raise_if_any_failed(ProcessGroup& group, const std::string& what,
                         const std::exception_ptr& error) {
  std::string message;
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
      message = "unknown error";
    }
    if (message.empty()) message = "failed";
  }
  Tensor failed = Tensor::from_vector({error ? 1.f : 0.f}, {1});
  group.all_reduce(failed);
  if (failed.item() == 0) return;
  const auto messages = all_gather_strings(group, message);
  std::string text = what;
  for (size_t r = 0; r < messages.size(); ++r)
    if (!messages[r].empty()) text += "\n  rank " + std::to_string(r) + ": " + messages[r];
  throw Error(text);
}

}  // namespace acc::dist
