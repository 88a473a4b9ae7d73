// A guard in front of the TOML parser: toml++ parses dotted keys, table headers, arrays
// and inline tables recursively, so a recipe (or a checkpoint's stored recipe) with a
// 50,000-part key or 200,000 nested brackets overflows the stack. Nesting is measured by
// a scan that skips strings and comments, and refused above a limit no recipe comes near.
#pragma once
#include <string>

namespace distrain {

constexpr int kMaxTomlNesting = 64;

// Throws UserError naming `file` and the line when keys or values nest deeper than
// kMaxTomlNesting levels (dotted-key parts plus open brackets and braces).
void check_toml_nesting(const std::string& text, const std::string& file);

}  // namespace distrain
