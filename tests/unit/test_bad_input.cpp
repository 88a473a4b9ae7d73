// Inputs that once crashed distrain: TOML nested deep enough to overflow the parser's
// stack (in a recipe, a --set, or a checkpoint's stored recipe) and a checkpoint whose
// /state was corrupted into values that index outside the epoch.
#include <hdf5.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "core/io/toml_depth.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/preflight.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

std::string repeated(const std::string& part, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += part;
  return s;
}

const char* kTiny = R"(
name = "tiny"
[data]
dataset = "synthetic"
train_examples = 64
test_examples = 32
image_shape = [4, 4, 1]
[model]
input_shape = [4, 4, 1]
layers = [{ type = "flatten" }, { type = "dense", units = 10 }]
)";

}  // namespace

TEST_CASE("toml nesting: deep keys, headers, arrays and inline tables are refused before the parser recurses") {
  const std::string deep_key = "a" + repeated(".a", 50000) + " = 1\n";
  const std::string deep_header = "[a" + repeated(".a", 200000) + "]\n";
  const std::string deep_array = "v = " + repeated("[", 100000) + repeated("]", 100000) + "\n";
  const std::string deep_inline = "v = " + repeated("{ a = ", 1000) + "1" + repeated(" }", 1000) + "\n";
  for (const std::string& text : {deep_key, deep_header, deep_array, deep_inline}) {
    CHECK_THROWS_WITH_AS(parse_recipe(text, "deep.toml"), doctest::Contains("deep.toml:1: keys or values nest deeper than 64"),
                         UserError);
  }
  CHECK_THROWS_WITH_AS(check_toml_nesting("name = \"x\"\n\n" + deep_key, "r.toml"), doctest::Contains("r.toml:3:"), UserError);
  // Dots and brackets in strings, comments and numbers are not nesting.
  const std::string shallow = "a.b.c = 0.001 # " + repeated("[.", 500) + "\ns = \"" + repeated("[.{", 500) +
                              "\"\nm = '''\n" + repeated("[", 500) + "\n'''\n[x.y]\nz = [[1, 2], { p = 1.5 }]\n";
  CHECK_NOTHROW(check_toml_nesting(shallow, "ok.toml"));
  CHECK_NOTHROW(parse_recipe(kTiny, "tiny.toml"));
  // --set: its value and its key.
  toml::table table;
  CHECK_THROWS_WITH_AS(apply_override(table, "x=" + repeated("[", 100000), "tiny.toml"), doctest::Contains("nest deeper"),
                       UserError);
  CHECK_THROWS_WITH_AS(apply_override(table, "a" + repeated(".a", 50000) + "=1", "tiny.toml"),
                       doctest::Contains("more than 64 parts"), UserError);
}

TEST_CASE("checkpoint: a corrupt /state (negative step or batch, impossible counts) is refused on load") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("distrain_bad_state_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Recipe recipe = parse_recipe(kTiny, "tiny.toml");
  auto s = make_strategy(recipe);
  s->model_state().initialize(1);
  auto written = [&](const TrainState& st) {
    const std::string path = (dir / checkpoint_name(st.step < 0 ? 0 : st.step)).string();
    save_checkpoint(path, s->model_state(), s->optimizer_state(), st, recipe.resolved_text());
    return path;
  };
  CHECK_NOTHROW(read_checkpoint_header(written(TrainState{11, 1, 2, LossStats{3.5, 4, 5}, 1.25})));
  for (const TrainState& bad : {TrainState{11, 1, -5, LossStats{}, 0.0}, TrainState{-5, 0, 0, LossStats{}, 0.0},
                                TrainState{11, -3, 0, LossStats{}, 0.0}, TrainState{11, 0, 1000000000, LossStats{}, 0.0},
                                TrainState{11, 0, 2, LossStats{1.0, 9, -1000}, 0.0},
                                TrainState{11, 0, 2, LossStats{std::nan(""), 1, 2}, 0.0}}) {
    CHECK_THROWS_WITH_AS(read_checkpoint_header(written(bad)), doctest::Contains("the file is corrupt"), UserError);
  }
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: a flipped bit in a variable or a dataset of another type is refused, naming the variable") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("distrain_bit_rot_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Recipe recipe = parse_recipe(kTiny, "tiny.toml");
  auto s = make_strategy(recipe);
  s->model_state().initialize(1);
  const std::string path = (dir / checkpoint_name(3)).string();
  save_checkpoint(path, s->model_state(), s->optimizer_state(), TrainState{3, 0, 3, LossStats{}, 0.0}, recipe.resolved_text());
  auto t = make_strategy(recipe);
  CHECK_NOTHROW(load_weights(path, t->model()));
  const char* kernel = "/model/dense_1/kernel";
  const int64_t n = 16 * 10;

  const std::string rotten = (dir / "rotten.h5").string();
  fs::copy_file(path, rotten);
  {
    const hid_t f = H5Fopen(rotten.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t ds = H5Dopen2(f, kernel, H5P_DEFAULT);
    std::vector<float> w(n);
    REQUIRE(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, w.data()) >= 0);
    uint32_t bits;
    std::memcpy(&bits, &w[7], 4);
    bits ^= 1u << 3;
    std::memcpy(&w[7], &bits, 4);
    REQUIRE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, w.data()) >= 0);
    H5Dclose(ds);
    H5Fclose(f);
  }
  CHECK_THROWS_WITH_AS(load_weights(rotten, t->model()), doctest::Contains("/model/dense_1/kernel does not match its checksum"),
                       UserError);

  const std::string ints = (dir / "ints.h5").string();
  fs::copy_file(path, ints);
  {
    const hid_t f = H5Fopen(ints.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(H5Ldelete(f, kernel, H5P_DEFAULT) >= 0);
    const hsize_t dims[2] = {16, 10};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t ds = H5Dcreate2(f, kernel, H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    std::vector<int32_t> w(n, 1);
    REQUIRE(H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, w.data()) >= 0);
    H5Dclose(ds);
    H5Sclose(space);
    H5Fclose(f);
  }
  CHECK_THROWS_WITH_AS(load_weights(ints, t->model()), doctest::Contains("/model/dense_1/kernel is not float32"), UserError);
  fs::remove_all(dir);
}

}  // namespace distrain::test

namespace distrain::test {

TEST_CASE("preflight: an overflowing or impossible batch is refused before allocation, naming the key") {
  Recipe recipe = parse_recipe(kTiny, "tiny.toml");
  auto s = make_strategy(recipe);
  CHECK(s->model().activation_bytes(std::numeric_limits<int64_t>::max()) == std::numeric_limits<int64_t>::max());
  CHECK_NOTHROW(check_memory_fits(recipe, *s));
  for (const int64_t batch : {int64_t{1000000000}, std::numeric_limits<int64_t>::max()}) {
    recipe.strategy.per_replica_batch = batch;
    CHECK_THROWS_WITH_AS(check_memory_fits(recipe, *s), doctest::Contains("strategy.per_replica_batch"), UserError);
  }
  recipe.strategy.per_replica_batch = 8;
  recipe.train.eval_batch = 1000000000000;
  CHECK_THROWS_WITH_AS(check_memory_fits(recipe, *s), doctest::Contains("train.eval_batch"), UserError);
  CHECK_THROWS_WITH_AS(cpu().allocate(size_t{1} << 62), doctest::Contains("out of memory"), UserError);
}

TEST_CASE("recipe: layer names a checkpoint cannot hold, devices that do not exist, overflowing shapes") {
  const std::string tiny(kTiny);
  for (const std::string name : {"a/b", ".", ""}) {
    std::string text = tiny;
    text.replace(text.find("units = 10"), 10, fmt::format("units = 10, name = \"{}\"", name));
    CHECK_THROWS_WITH_AS(make_strategy(parse_recipe(text, "tiny.toml")), doctest::Contains("model.layers[1].name"), UserError);
  }
  CHECK_THROWS_WITH_AS(parse_recipe(tiny + "[strategy]\ndevices = [\"cpu:999\"]\n", "tiny.toml"),
                       doctest::Contains("strategy.devices"), UserError);
  CHECK_NOTHROW(parse_recipe(tiny + "[strategy]\nname = \"mirrored\"\ndevices = [\"cpu:0\", \"cpu:1\"]\n", "tiny.toml"));
  std::string huge = tiny;
  huge.replace(huge.find("input_shape = [4, 4, 1]"), 23, "input_shape = [4294967296, 4294967296, 4]");
  CHECK_THROWS_WITH_AS(make_strategy(parse_recipe(huge, "tiny.toml")), doctest::Contains("overflows"), UserError);
}

TEST_CASE("checkpoint: a recipe over HDF5's 64 KiB attribute limit round-trips; stray ckpt names are ignored") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("distrain_big_recipe_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Recipe recipe = parse_recipe(std::string(kTiny) + "# padding\n", "tiny.toml");
  auto s = make_strategy(recipe);
  s->model_state().initialize(1);
  const std::string text = recipe.resolved_text() + "\n# " + std::string(100000, 'x') + "\n";
  const std::string path = (dir / checkpoint_name(3)).string();
  save_checkpoint(path, s->model_state(), s->optimizer_state(), TrainState{3, 0, 3, LossStats{}, 0.0}, text);
  CHECK(read_checkpoint_header(path).recipe == text);
  std::ofstream(dir / "ckpt-99999999999999999999.h5") << "not ours";
  CHECK(list_checkpoints(dir.string()) == std::vector<std::string>{path});
  fs::remove_all(dir);
}

}  // namespace distrain::test
