#include <unistd.h>

#include <cerrno>

#include "cli/commands.hpp"

namespace distrain::cli {

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

CLI::Validator at_least(long long lowest) {
  return CLI::Validator(
      [lowest](std::string& text) -> std::string {
        long long value = 0;
        if (CLI::detail::lexical_cast(text, value) && value >= lowest) return "";
        return "must be a whole number of at least " + std::to_string(lowest) + ", got '" + text + "'";
      },
      "INT>=" + std::to_string(lowest));
}

bool is_user_condition(const std::error_code& code) {
  if (code.category() != std::generic_category() && code.category() != std::system_category()) return false;
  switch (code.value()) {
    case ENOSPC: case EDQUOT: case EACCES: case EPERM: case EROFS: case ENOTDIR: case EISDIR: case ENOENT:
    case EEXIST: case ENAMETOOLONG: case ELOOP: case EXDEV: case EBUSY: case ENOTEMPTY:
      return true;
    default:
      return false;
  }
}

}  // namespace distrain::cli
