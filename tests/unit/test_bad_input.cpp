// Inputs that once crashed distrain or were accepted wrongly: TOML nested deep enough to
// overflow the parser's stack (in a recipe, a --set, or a checkpoint's stored recipe); a
// checkpoint whose /state was corrupted into values that index outside the epoch, whose
// attributes hold more values than one, whose variables rotted or changed type; recipe
// sizes whose arithmetic overflowed int64 (found by UBSan, scripts/sanitize-test.sh);
// every input a fuzzer crashed on (tests/fuzz/regressions).
#include <hdf5.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "core/base/h5_id.hpp"
#include "core/base/host_memory.hpp"
#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "core/io/toml_depth.hpp"
#include "core/model/model.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/preflight.hpp"
#include "tests/fuzz/fuzz_inputs.hpp"
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

  // Edited as an editor would leave it: NaN written and the checksum deleted, or the
  // checksum replaced by a string. Both once loaded (eval exit 0 with a null loss; resume).
  auto edited = [&](const std::string& name, auto&& edit) {
    const std::string copy = (dir / name).string();
    fs::copy_file(path, copy);
    const hid_t f = H5Fopen(copy.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t ds = H5Dopen2(f, kernel, H5P_DEFAULT);
    edit(ds);
    H5Dclose(ds);
    H5Fclose(f);
    return copy;
  };
  const std::string with_nan = edited("nan.h5", [&](hid_t ds) {
    std::vector<float> w(n, 0.5f);
    w[12] = std::numeric_limits<float>::quiet_NaN();
    REQUIRE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, w.data()) >= 0);
    REQUIRE(H5Adelete(ds, "crc32c") >= 0);
  });
  CHECK_THROWS_WITH_AS(load_weights(with_nan, t->model()),
                       doctest::Contains("/model/dense_1/kernel holds nan at element 12; a checkpoint must hold finite numbers"),
                       UserError);
  const std::string string_crc = edited("string_crc.h5", [&](hid_t ds) {
    REQUIRE(H5Adelete(ds, "crc32c") >= 0);
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, 8);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attr = H5Acreate2(ds, "crc32c", type, space, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(H5Awrite(attr, type, "12345678") >= 0);
    H5Aclose(attr);
    H5Sclose(space);
    H5Tclose(type);
  });
  CHECK_THROWS_WITH_AS(load_weights(string_crc, t->model()),
                       doctest::Contains("/model/dense_1/kernel has a crc32c attribute that is not one integer"), UserError);
  fs::remove_all(dir);
}

}  // namespace distrain::test

namespace distrain::test {

TEST_CASE("preflight: an overflowing or impossible batch is refused before allocation, naming the key") {
  Recipe recipe = parse_recipe(kTiny, "tiny.toml");
  auto s = make_strategy(recipe);
  CHECK(s->model().activation_bytes(std::numeric_limits<int64_t>::max()) == std::numeric_limits<int64_t>::max());
  CHECK_NOTHROW(check_memory_fits(recipe, *s, available_host_memory()));
  for (const int64_t batch : {int64_t{1000000000}, std::numeric_limits<int64_t>::max()}) {
    recipe.strategy.per_replica_batch = batch;
    CHECK_THROWS_WITH_AS(check_memory_fits(recipe, *s, available_host_memory()),
                         doctest::Contains("strategy.per_replica_batch"), UserError);
  }
  recipe.strategy.per_replica_batch = 8;
  recipe.train.eval_batch = 1000000000000;
  CHECK_THROWS_WITH_AS(check_memory_fits(recipe, *s, available_host_memory()), doctest::Contains("train.eval_batch"), UserError);
  CHECK_THROWS_WITH_AS(cpu().allocate(size_t{1} << 62), doctest::Contains("out of memory"), UserError);
}

TEST_CASE("preflight: zero replicas the host cannot hold are refused before they are built") {
  std::string text = kTiny;
  text.replace(text.find("units = 10"), 10, R"(units = 10 }, { type = "dense", units = 400000000)");  // 10.8 billion parameters
  text += "[strategy]\nname = \"zero\"\nstage = 1\ndevices = [\"cpu:0\", \"cpu:1\"]\n";
  const Recipe huge = parse_recipe(text, "huge.toml");
  CHECK(replicas_over_host(huge).has_value());  // each replica's whole values alone are 43 GB
  CHECK_THROWS_WITH_AS(train(huge, quiet((std::filesystem::temp_directory_path() / "huge_zero").string())),
                       doctest::Contains("huge.toml: this process's zero replicas need"), UserError);
  Recipe tiny = parse_recipe(kTiny, "tiny.toml");
  tiny.strategy.name = "zero";
  tiny.strategy.devices = {"cpu:0", "cpu:1"};
  CHECK_FALSE(replicas_over_host(tiny).has_value());
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
  CHECK_THROWS_WITH_AS(make_strategy(parse_recipe(huge, "tiny.toml")), doctest::Contains("model.input_shape"), UserError);
}

TEST_CASE("checkpoint: a recipe over HDF5's 64 KiB attribute limit round-trips, and stray ckpt names are ignored") {
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


TEST_CASE("checkpoint: an attribute holding many values where one is expected is refused, not read past its end") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("distrain_bad_attr_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Recipe recipe = parse_recipe(kTiny, "tiny.toml");
  auto s = make_strategy(recipe);
  s->model_state().initialize(1);
  const std::string path = (dir / checkpoint_name(1)).string();
  save_checkpoint(path, s->model_state(), s->optimizer_state(), TrainState{1, 0, 1, LossStats{}, 0.0}, recipe.resolved_text());
  {  // /step becomes an array of 64 int64 values
    H5Id f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    REQUIRE(f.ok());
    REQUIRE(H5Adelete(f, "step") >= 0);
    const hsize_t n = 64;
    std::vector<int64_t> values(n, 7);
    H5Id space(H5Screate_simple(1, &n, nullptr), H5Sclose);
    H5Id attr(H5Acreate2(f, "step", H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    REQUIRE(H5Awrite(attr, H5T_NATIVE_INT64, values.data()) >= 0);
  }
  CHECK_THROWS_AS(read_checkpoint_header(path), UserError);
  fs::remove_all(dir);
}

// Every input a fuzzer (scripts/fuzz.sh) ever crashed on, replayed through what the
// target does with it; a UserError is the expected end, anything else fails here.
TEST_CASE("fuzz regressions: every input a fuzzer once crashed on now ends in a UserError at most") {
  const fs::path root = fs::path(DISTRAIN_SOURCE_DIR) / "tests/fuzz/regressions";
  const std::vector<std::pair<std::string, void (*)(std::span<const uint8_t>)>> targets{
      {"fuzz_recipe", fuzz::recipe_input}, {"fuzz_idx", fuzz::idx_input}, {"fuzz_checkpoint", fuzz::checkpoint_input},
      {"fuzz_checkpoint_bytes", fuzz::checkpoint_file_input}, {"fuzz_images", fuzz::image_input},
      {"fuzz_tokenizer", fuzz::tokenizer_input}, {"fuzz_safetensors", fuzz::safetensors_input}};
  int replayed = 0;
  for (const auto& [target, run] : targets) {
    if (!fs::is_directory(root / target)) continue;
    for (const auto& e : fs::directory_iterator(root / target)) {
      std::ifstream in(e.path(), std::ios::binary);
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      INFO(e.path().string());
      CHECK_NOTHROW(run(bytes));
      ++replayed;
    }
  }
  CHECK(replayed > 0);
}

TEST_CASE("recipe sizes whose arithmetic would overflow int64 are refused with the key") {
  const std::string base = std::string(kTiny) + "[strategy]\n";
  CHECK_THROWS_WITH_AS(parse_recipe(base + "per_replica_batch = 9223372036854775807\n", "r.toml"),
                       doctest::Contains("per_replica_batch"), UserError);
  CHECK_THROWS_WITH_AS(parse_recipe(kTiny, "r.toml", {"train.eval_batch=9223372036854775807"}), doctest::Contains("eval_batch"),
                       UserError);
  auto model_of = [](const std::string& layers, const std::string& input = "[4, 4, 1]") {
    const Recipe r = parse_recipe(kTiny, "r.toml", {"model.input_shape=" + input, "model.layers=" + layers});
    Model m(r.model(), cpu());
  };
  CHECK_THROWS_WITH_AS(model_of(R"([{ type = "conv2d", filters = 2, kernel_size = 9223372036854775807 }])"),
                       doctest::Contains("kernel_size"), UserError);
  CHECK_THROWS_WITH_AS(model_of(R"([{ type = "conv2d", filters = 2, kernel_size = 1, strides = 9223372036854775807, padding = "same" }])"),
                       doctest::Contains("strides"), UserError);
  CHECK_THROWS_WITH_AS(model_of(R"([{ type = "max_pool2d", pool_size = 9223372036854775807, padding = "same" }])"),
                       doctest::Contains("pool_size"), UserError);
  CHECK_THROWS_WITH_AS(model_of(R"([{ type = "conv2d", filters = 1099511627776, kernel_size = 65536 }])", "[65536, 65536, 4]"),
                       doctest::Contains("too many weights"), UserError);
  CHECK_THROWS_WITH_AS(model_of(R"([{ type = "flatten" }, { type = "dense", units = 4611686018427387904 }])"),
                       doctest::Contains("too many weights"), UserError);
  CHECK_THROWS_WITH_AS(model_of(R"([{ type = "flatten" }])", "[9223372036854775807, 2, 2]"), doctest::Contains("input_shape"),
                       UserError);
  CHECK_THROWS_WITH_AS(parse_recipe(kTiny, "r.toml", {"model.layers.5.units=3"}), doctest::Contains("0..1"), UserError);
  CHECK_THROWS_WITH_AS(parse_recipe(kTiny, "r.toml", {"x=[]", "x.0.y=1"}), doctest::Contains("(empty)"), UserError);
}

}  // namespace distrain::test
