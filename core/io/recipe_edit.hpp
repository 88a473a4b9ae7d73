// A recipe file changed with the least edit, for the recipes distrain writes from a user's
// (`plan --write`): the user's comments, key order and number spellings stay; only what
// differs is rewritten.
#pragma once
#include <optional>
#include <string>
#include <toml++/toml.h>

namespace distrain {

// `text` (a recipe file) edited so that it reads as `target`: keys whose values differ are
// rewritten in place (a comment after the value kept), keys `target` lacks are deleted, new
// keys go after the last key of their table (a table the text lacks is appended as a new
// [section]). Edits are made to scalar values and arrays of scalars in the root and in
// tables written with a [header]; nullopt where `target` differs otherwise (in an array of
// tables such as [[model.layers]], say) or where the edited text does not read back as
// `target`.
std::optional<std::string> edit_recipe_text(const std::string& text, const toml::table& target);

// edit_recipe_text for a recipe of another layout of the same model (plan --write): [model]
// stays as `text` writes it (its "vocabulary" sizes stay words) unless `model_changed`
// (a --set into it).
std::optional<std::string> edit_layout_text(const std::string& text, const toml::table& target, bool model_changed);

// A scalar or an array of scalars as the shortest TOML text that reads back as it
// (0.99, not 0.98999999999999999); nullopt for tables and arrays holding tables.
std::optional<std::string> toml_value_text(const toml::node& value);

}  // namespace distrain
