// Where a plugin distrain ships (a shared library opened at run time) is found: the path
// in its environment variable when set, else beside the executable, else in ../lib (the
// bundle's layout).
#pragma once
#include <string>

namespace distrain {

// The plugin's path, or "" where none is found (a set variable is returned as it is, for
// the caller to say it does not exist).
std::string find_plugin(const char* environment_variable, const char* file_name);

}  // namespace distrain
