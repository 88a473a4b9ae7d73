#include <unistd.h>

#include <cerrno>

#include "cli/commands.hpp"

namespace distrain::cli {

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

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
