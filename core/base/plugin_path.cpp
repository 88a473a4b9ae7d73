#include "core/base/plugin_path.hpp"

#include <cstdlib>
#include <filesystem>

namespace distrain {

std::string find_plugin(const char* environment_variable, const char* file_name) {
  namespace fs = std::filesystem;
  if (const char* path = std::getenv(environment_variable); path && *path) return path;
  std::error_code ec;
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  if (ec) return "";
  for (const fs::path& candidate : {exe_dir / file_name, exe_dir / ".." / "lib" / file_name})
    if (fs::exists(candidate)) return candidate.lexically_normal().string();
  return "";
}

}  // namespace distrain
