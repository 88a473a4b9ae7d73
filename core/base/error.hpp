// Errors thrown by library code. Nothing under core/ prints and exits: it throws,
// and cli/main.cpp reports the message once and exits non-zero (aborting other ranks).
//   Error      a broken internal invariant: the message carries file:line and the statement.
//   UserError  bad input (recipe, data, checkpoint, flags): the message is for the user and
//              names the file, the key or the rank, what was expected and what to do.
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace distrain {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class UserError : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void check_failed(const char* file, int line, const char* statement, const std::string& message);
}  // namespace detail

}  // namespace distrain

// DT_CHECK(condition, "format {}", args...): throws Error with file:line and the failed statement.
#define DT_CHECK(cond, ...)                                                                 \
  do {                                                                                      \
    if (!(cond)) ::distrain::detail::check_failed(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (0)

// DT_USER_CHECK(condition, "format {}", args...): throws UserError with just the message.
#define DT_USER_CHECK(cond, ...)                                              \
  do {                                                                        \
    if (!(cond)) throw ::distrain::UserError(fmt::format(__VA_ARGS__));       \
  } while (0)
