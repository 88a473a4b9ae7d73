#include "core/base/error.hpp"

#include <cstring>

namespace distrain::detail {

void check_failed(const char* file, int line, const char* statement, const std::string& message) {
  const char* root = std::strstr(file, "core/");
  throw Error(fmt::format("{} ({}:{}: check failed: {})", message, root ? root : file, line, statement));
}

}  // namespace distrain::detail
