// plan --write's recipe: the user's file edited only where the chosen layout differs
// (core/io/recipe_edit.hpp).
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "core/io/recipe.hpp"
#include "core/io/recipe_edit.hpp"
#include "core/plan/plan_layouts.hpp"

using namespace distrain;

namespace {

const char* kCommented = R"(# my job, tuned by hand
name = "job"
seed = 7

[optimizer]
type = "adam"
beta_2 = 0.99      # not 0.98999999999999999
learning_rate = 3e-4

[strategy]
name = "mirrored"   # two GPUs here
cross_device_ops = "hierarchical_copy"
devices = [
  "cpu:0",  # first
  "cpu:1",
]
per_replica_batch = 32
)";

}  // namespace

TEST_CASE("recipe edit: only the keys that differ change, and comments, order and numbers stay") {
  toml::table target = toml::parse(kCommented);
  toml::table& strategy = *target["strategy"].as_table();
  strategy.insert_or_assign("name", "mesh");
  strategy.erase("cross_device_ops");
  strategy.insert_or_assign("devices", toml::array{"cpu:0"});
  strategy.insert_or_assign("data", 2);
  target.insert_or_assign("train", toml::table{{"recompute", "blocks"}, {"accumulate_steps", 4}});
  const std::optional<std::string> edited = edit_recipe_text(kCommented, target);
  REQUIRE(edited.has_value());
  CHECK(toml::parse(*edited) == target);
  CHECK(edited->find("# my job, tuned by hand") == 0);
  CHECK(edited->find("beta_2 = 0.99      # not 0.98999999999999999") != std::string::npos);
  CHECK(edited->find("learning_rate = 3e-4") != std::string::npos);
  CHECK(edited->find("name = \"mesh\"   # two GPUs here") != std::string::npos);
  CHECK(edited->find("cross_device_ops") == std::string::npos);
  CHECK(edited->find("devices = [\"cpu:0\"]\nper_replica_batch = 32\ndata = 2\n") != std::string::npos);
  CHECK(edited->find("\n[train]\n") != std::string::npos);
  // Nothing to change: the text itself.
  CHECK(edit_recipe_text(kCommented, toml::parse(kCommented)) == std::string(kCommented));
}

TEST_CASE("recipe edit: values in their shortest form, and what is not an edit of keys is refused") {
  CHECK(toml_value_text(toml::value<double>(0.99)) == "0.99");
  CHECK(toml_value_text(toml::value<double>(3.0)) == "3.0");
  CHECK(toml_value_text(toml::value<double>(1e-5)) == "1e-05");
  CHECK(toml_value_text(toml::value<int64_t>(-4)) == "-4");
  CHECK(toml_value_text(toml::value<std::string>("a \"b\"")) == "\"a \\\"b\\\"\"");
  CHECK(toml_value_text(toml::array{1, 2.5, "x"}) == "[1, 2.5, \"x\"]");
  CHECK_FALSE(toml_value_text(toml::table{}).has_value());
  const std::string layers = "[[model.layers]]\ntype = \"dense\"\nunits = 4\n";
  toml::table changed = toml::parse(layers);
  changed["model"]["layers"][0].as_table()->insert_or_assign("units", 8);
  CHECK_FALSE(edit_recipe_text(layers, changed).has_value());
  CHECK_FALSE(edit_recipe_text("x = \"\"\"\nmulti\n\"\"\"\n", toml::table{{"x", "one"}}).has_value());
}

TEST_CASE("recipe edit: a plan layout of a shipped recipe edits its [strategy] and [train] only") {
  const std::string path = std::string(DISTRAIN_SOURCE_DIR) + "/recipes/shakespeare_char_gpt.toml";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const Recipe base = load_recipe(path, {"data.path=\"" + std::string(DISTRAIN_SOURCE_DIR) + "/data/tiny_shakespeare.txt\""});
  PlanLayout layout{2, 2, 1, 1};
  layout.recompute = true;
  const Recipe chosen = layout_recipe(base, layout, 64);
  CHECK_FALSE(edit_recipe_text(text.str(), *chosen.table).has_value());  // its sizes are words there, numbers here
  const std::optional<std::string> edited = edit_layout_text(text.str(), *chosen.table, false);
  REQUIRE(edited.has_value());
  CHECK(edited->find("input_dim = \"vocabulary\"") != std::string::npos);
  const Recipe reread = parse_recipe(*edited, "written.toml");
  CHECK(reread.strategy.mesh.data == 2);
  CHECK(reread.strategy.mesh.tensor == 2);
  CHECK(reread.train.recompute_blocks);
  // The model's lines and their comments are the user's own.
  const std::string first_layer = text.str().substr(text.str().find("[[model.layers]]"), 200);
  CHECK(edited->find(first_layer) != std::string::npos);
}
