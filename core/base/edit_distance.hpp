// How many single-character edits (insertions, deletions, substitutions) turn one word into
// another: what "did you mean" suggestions rank candidates by (recipe keys, subcommands).
#pragma once
#include <cstddef>
#include <string_view>

namespace distrain {

size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace distrain
