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

// What an exception tells a user: e.what(), after "out of memory: " for a std::bad_alloc (an
// allocation refused outside acc's allocator, whose own errors say so).
inline std::string error_message(const std::exception& e) {
  return (dynamic_cast<const std::bad_alloc*>(&e) ? std::string("out of memory: ") : std::string()) + e.what();
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
