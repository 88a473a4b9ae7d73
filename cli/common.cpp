#include <unistd.h>

#include "cli/commands.hpp"

namespace distrain::cli {

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

}  // namespace distrain::cli
