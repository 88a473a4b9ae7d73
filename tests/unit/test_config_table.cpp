// ConfigTable: typed getters; every float key rejects NaN and infinity with its key named.
#include <filesystem>
#include <fstream>

#include "core/base/error.hpp"
#include "core/base/config_table.hpp"
#include "core/io/recipe.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

TEST_CASE("config table: get_float rejects nan and inf, naming file, line and key") {
  const toml::table t = toml::parse("a = nan\nb = inf\nc = -inf\nd = 0.5\ne = 2\nf = { 256 = nan }\n");
  ConfigTable c(t, "r.toml", "optimizer.");
  CHECK_THROWS_WITH_AS(c.get_float("a"), doctest::Contains("r.toml:1: optimizer.a: expected a finite number, not nan"), UserError);
  CHECK_THROWS_WITH_AS(c.get_float("b"), doctest::Contains("r.toml:2: optimizer.b: expected a finite number, not inf"), UserError);
  CHECK_THROWS_WITH_AS(c.get_float("c"), doctest::Contains("optimizer.c: expected a finite number, not -inf"), UserError);
  CHECK(c.get_float("d") == 0.5);
  CHECK(c.get_float("e") == 2.0);
  CHECK_THROWS_WITH_AS(c.get_int_keyed_floats("f"), doctest::Contains("optimizer.f: entry '256': expected a finite learning rate"),
                       UserError);
}

TEST_CASE("config table: nan and inf are rejected for optimizer keys from --set and for layer keys") {
  const fs::path p = fs::temp_directory_path() / "distrain_config_nan.toml";
  std::ofstream(p) << "name = \"nan\"\n[model]\ninput_shape = [4]\nlayers = [{ type = \"dense\", units = 2 }]\n"
                       "[optimizer]\ntype = \"adam\"\n";
  for (const std::string set : {"optimizer.learning_rate=inf", "optimizer.beta_1=nan", "optimizer.epsilon=inf"}) {
    const std::string want = set.substr(0, set.find('=')) + ": expected a finite number";
    CHECK_THROWS_WITH_AS(load_recipe(p.string(), {set}), doctest::Contains(want.c_str()), UserError);
  }
  CHECK_THROWS_WITH_AS(make_layer("type = 'dropout'\nrate = nan\n"), doctest::Contains("rate: expected a finite number, not nan"),
                       UserError);
  CHECK_THROWS_WITH_AS(make_layer("type = 'batch_norm'\nmomentum = nan\n"),
                       doctest::Contains("momentum: expected a finite number, not nan"), UserError);
}

}  // namespace
}  // namespace distrain::test
