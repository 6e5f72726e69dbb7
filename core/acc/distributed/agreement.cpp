#include "acc/distributed/agreement.h"

#include <cstring>

#include "acc/util/error.h"

namespace acc::dist {

Gathered all_gather_uneven(ProcessGroup& group, const Tensor& mine) {
  const int n = group.size();
  Tensor sizes = Tensor::empty({n}, DType::i64);
  group.all_gather(Tensor::from_vector_i64({mine.numel()}, {1}), sizes);
  Gathered out{Tensor(), std::vector<int64_t>(sizes.data<int64_t>(), sizes.data<int64_t>() + n)};
  int64_t total = 0;
  for (const int64_t c : out.counts) total += c;
  Tensor all = Tensor::empty({std::max<int64_t>(total, 1)}, mine.dtype());
  out.all = all.slice_flat(0, {total});
  if (total > 0) group.all_gather_v(mine, out.all, out.counts);
  return out;
}

std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& mine) {
  // Strings travel as i32 words (the collectives move whole elements), with their byte count
  // in front.
  const int64_t words = (static_cast<int64_t>(mine.size()) + 3) / 4;
  Tensor packed = Tensor::zeros({1 + words}, DType::i32);
  packed.data<int32_t>()[0] = static_cast<int32_t>(mine.size());
  std::memcpy(packed.data<int32_t>() + 1, mine.data(), mine.size());
  const Gathered gathered = all_gather_uneven(group, packed);
  std::vector<std::string> out;
  const int32_t* p = gathered.all.data<int32_t>();
  for (const int64_t count : gathered.counts) {
    out.emplace_back(reinterpret_cast<const char*>(p + 1), static_cast<size_t>(p[0]));
    p += count;
  }
  return out;
}

bool any_rank(ProcessGroup& group, bool mine) {
  if (group.size() == 1) return mine;
  Tensor flag = Tensor::from_vector({mine ? 1.f : 0.f}, {1});
  group.all_reduce(flag);
  return flag.item() > 0;
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
