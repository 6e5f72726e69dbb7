#pragma once
// acc::Error and the ACC_CHECK family: every user-facing failure names the thing and what was
// expected, so the message alone tells the user what to fix.
#include <exception>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace acc {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// What goes before e.what() for a user: "out of memory: " for a std::bad_alloc (an allocation
// refused outside acc's allocator, whose own errors say so; not a bad_array_new_length, a size
// bug), else nothing. Allocates nothing: it is used when memory has run out.
inline const char* error_prefix(const std::exception& e) {
  const bool refused = dynamic_cast<const std::bad_alloc*>(&e) && !dynamic_cast<const std::bad_array_new_length*>(&e);
  return refused ? "out of memory: " : "";
}

namespace detail {
template <class... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

}  // namespace acc

// ACC_CHECK(cond, "op: expected ", x, " got ", y) throws acc::Error with the concatenated message.
#define ACC_CHECK(cond, ...)                                       \
  do {                                                             \
    if (!(cond)) [[unlikely]]                                      \
      throw ::acc::Error(::acc::detail::concat(__VA_ARGS__));      \
  } while (0)

#define ACC_FAIL(...) throw ::acc::Error(::acc::detail::concat(__VA_ARGS__))
