// A user's HDF5 data (data.dataset = "hdf5"): files written here with the HDF5 C API, as
// h5py would write NumPy arrays. Shapes and types that read, each bad file's one-line
// error, and a model trained on such a file.
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/base/h5_id.hpp"
#include "datasets/hdf5_data.hpp"
#include "datasets/loader.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

class H5Writer {
 public:
  explicit H5Writer(const fs::path& path) : path_(path.string()), file_(H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose) {
    REQUIRE(file_.ok());
  }
  // `type`: the stored type (H5T_STD_U8LE, H5T_IEEE_F32LE...); `memory`: that of `values`.
  template <typename T>
  H5Writer& add(const std::string& name, hid_t type, hid_t memory, std::vector<hsize_t> dims, const std::vector<T>& values) {
    H5Id space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
    H5Id link_props(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(link_props, 1);
    H5Id ds(H5Dcreate2(file_, name.c_str(), type, space, link_props, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
    REQUIRE(ds.ok());
    REQUIRE(H5Dwrite(ds, memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
    return *this;
  }
  hid_t id() const { return file_; }
  H5Writer& u8(const std::string& name, std::vector<hsize_t> dims) {
    return add(name, H5T_STD_U8LE, H5T_NATIVE_UINT8, dims, std::vector<uint8_t>(count(dims), 7));
  }
  H5Writer& labels(const std::string& name, const std::vector<int64_t>& values, hid_t type = H5T_STD_I64LE) {
    return add(name, type, H5T_NATIVE_INT64, {values.size()}, values);
  }

 private:
  static size_t count(const std::vector<hsize_t>& dims) {
    size_t n = 1;
    for (hsize_t d : dims) n *= d;
    return n;
  }
  std::string path_;
  H5Id file_;
};

fs::path temp_file(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "distrain_test_hdf5";
  fs::create_directories(dir);
  fs::remove(dir / name);
  return dir / name;
}

DataSpec spec_for(const fs::path& file) {
  DataSpec spec;
  spec.dataset = "hdf5";
  spec.path = file.string();
  spec.num_classes = 0;
  return spec;
}

// A valid file: 4 training and 2 test images of 2x3x2 uint8, labels 0..2.
H5Writer& valid(H5Writer& w) {
  return w.u8("x_train", {4, 2, 3, 2}).labels("y_train", {0, 1, 2, 1}).u8("x_test", {2, 2, 3, 2}).labels("y_test", {2, 0});
}

void check_error(const DataSpec& spec, const std::string& want) {
  INFO(want);
  try {
    load_dataset(spec, 0);
    FAIL("no error");
  } catch (const UserError& e) {
    const std::string msg = e.what();
    CHECK(msg.find(want) != std::string::npos);
    CHECK(msg.find(spec.path) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

}  // namespace

TEST_CASE("hdf5 data: uint8 (N, H, W, C) images, labels of any integer type, classes from the largest label") {
  const fs::path file = temp_file("nhwc.h5");
  {
    H5Writer w(file);
    w.add("x_train", H5T_STD_U8LE, H5T_NATIVE_UINT8, {3, 2, 2, 3}, std::vector<uint8_t>{
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
        31, 32, 33, 34, 255});
    w.labels("y_train", {0, 4, 1}, H5T_STD_U8LE).u8("x_test", {2, 2, 2, 3}).labels("y_test", {5, 0}, H5T_STD_I16BE);
  }
  const Splits s = load_dataset(spec_for(file), 0);
  CHECK(s.train.example_shape == Shape{2, 2, 3});
  CHECK(s.train.size() == 3);
  CHECK(s.train.pixels.size() == 36);
  CHECK(s.train.pixels[35] == 255);
  CHECK(s.train.floats.empty());
  CHECK(s.train.labels == std::vector<int32_t>{0, 4, 1});
  CHECK(s.test.labels == std::vector<int32_t>{5, 0});
  CHECK(s.train.num_classes == 6);  // the test split's label 5
  CHECK(s.test.num_classes == 6);
  CHECK(s.train.source == file.string() + ":x_train");

  DataSpec ten = spec_for(file);
  ten.num_classes = 10;
  CHECK(load_dataset(ten, 0).train.num_classes == 10);
}

TEST_CASE("hdf5 data: float32 (N, features) rows under other names reach the loader as they are, (N, H, W) gets C = 1") {
  const fs::path file = temp_file("features.h5");
  const std::vector<float> rows{0.5f, -1.f, 2.f, 1e3f, 0.25f, -0.125f};  // 3 rows of 2 features
  H5Writer(file)
      .add("data/train_x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {3, 2}, rows)
      .add("data/train_y", H5T_STD_I32LE, H5T_NATIVE_INT64, {3, 1}, std::vector<int64_t>{1, 0, 1})
      .add("data/test_x", H5T_IEEE_F64LE, H5T_NATIVE_FLOAT, {1, 2}, std::vector<float>{3.f, 4.f})
      .labels("data/test_y", {0});
  DataSpec spec = spec_for(file);
  spec.train_images = "data/train_x";
  spec.train_labels = "data/train_y";
  spec.test_images = "data/test_x";
  spec.test_labels = "data/test_y";
  const Splits s = load_dataset(spec, 0);
  CHECK(s.train.example_shape == Shape{2});
  CHECK(s.train.floats == rows);
  CHECK(s.train.pixels.empty());
  CHECK(s.test.floats == std::vector<float>{3.f, 4.f});  // float64, read as float32
  CHECK(s.train.num_classes == 2);
  Loader loader(s.train, LoaderSpec{3, 1, false, false, 0});
  loader.start(0);
  const auto batch = loader.next();
  REQUIRE(batch);
  CHECK(batch->replicas[0].images == rows);
  CHECK(batch->replicas[0].labels == std::vector<int32_t>{1, 0, 1});

  const fs::path nhw = temp_file("nhw.h5");
  H5Writer(nhw).u8("x_train", {2, 5, 4}).labels("y_train", {0, 1}).u8("x_test", {1, 5, 4}).labels("y_test", {1});
  CHECK(load_dataset(spec_for(nhw), 0).train.example_shape == Shape{5, 4, 1});
}

TEST_CASE("hdf5 data: every bad file is a one-line error naming the file, the dataset and the key") {
  const fs::path missing = temp_file("missing.h5");
  check_error(spec_for(missing), "missing.h5: not found (data.path)");
  const fs::path text = temp_file("text.h5");
  std::ofstream(text) << "not hdf5\n";
  check_error(spec_for(text), "text.h5: not an HDF5 file (data.path)");

  const fs::path file = temp_file("bad.h5");
  auto with = [&](auto&& build) {
    {
      H5Writer w(file);
      build(w);
    }
    return spec_for(file);
  };
  check_error(with([](H5Writer& w) { w.u8("x_train", {4, 2, 3, 2}).labels("y_train", {0, 1, 2, 1}); }),
              "no dataset 'x_test' (data.test_images); the file has x_train, y_train");
  CHECK_NOTHROW(load_dataset(with([](H5Writer& w) { valid(w).u8("other", {4}); }), 0));  // other datasets are fine
  check_error(with([](H5Writer& w) {
                w.u8("x_train", {4}).labels("y_train", {0, 1, 2, 1}).u8("x_test", {2, 2}).labels("y_test", {2, 0});
              }),
              "'x_train' (data.train_images) has shape (4,); images must be (N, H, W, C), (N, H, W) or (N, features)");
  check_error(with([](H5Writer& w) {
                w.add("x_train", H5T_STD_I16LE, H5T_NATIVE_INT64, {4, 2}, std::vector<int64_t>(8, 1))
                    .labels("y_train", {0, 1, 2, 1});
              }),
              "'x_train' (data.train_images) is int16; images must be uint8 or float32");
  check_error(with([](H5Writer& w) {
                w.u8("x_train", {4, 2}).add("y_train", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4}, std::vector<float>(4, 1.f));
              }),
              "'y_train' (data.train_labels) is float32; labels must be integers");
  check_error(with([](H5Writer& w) { w.u8("x_train", {4, 2}).labels("y_train", {0, 1, -1, 1}); }),
              "'y_train' (data.train_labels) has label -1 at index 2");
  check_error(with([](H5Writer& w) { w.u8("x_train", {4, 2}).labels("y_train", {0, 1, 1}); }),
              "'y_train' (data.train_labels) has 3 labels for the 4 examples of 'x_train' (data.train_images)");
  check_error(with([](H5Writer& w) { w.u8("x_train", {4, 2}).u8("y_train", {4, 2}); }),
              "'y_train' (data.train_labels) has shape (4, 2); labels must be (N,) or (N, 1)");
  check_error(with([](H5Writer& w) {
                w.u8("x_train", {4, 2}).labels("y_train", {0, 1, 0, 1}).u8("x_test", {2, 3}).labels("y_test", {1, 0});
              }),
              "'x_test' (data.test_images) has examples of shape (3,), 'x_train' (data.train_images) (2,)");
  check_error(with([](H5Writer& w) {
                w.u8("x_train", {2, 2}).labels("y_train", {0, 0}).u8("x_test", {1, 2}).labels("y_test", {0});
              }),
              "every label is 0");
  check_error(with([](H5Writer& w) { w.u8("x_train", {0, 2}); }), "'x_train' (data.train_images) has shape (0, 2): no examples");
  // Found by the bad-input corpus: a folder given as the file, a NaN test pixel, shapes
  // whose size overflows or exceeds the machine's memory.
  const fs::path folder = temp_file("folder.h5");
  fs::create_directories(folder);
  check_error(spec_for(folder), "folder.h5: a folder, not an HDF5 file (data.path)");
  check_error(with([](H5Writer& w) {
                w.u8("x_train", {2, 2}).labels("y_train", {0, 1});
                w.add("x_test", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2, 2}, std::vector<float>{1, 2, std::nanf(""), 4});
                w.labels("y_test", {0, 1});
              }),
              "'x_test' (data.test_images) holds nan at example 1 (element 2); test examples must be finite");
  auto huge = [&](std::vector<hsize_t> dims) {  // a dataset whose header claims `dims`, never written
    H5Writer w(file);
    H5Id space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
    H5Id ds(H5Dcreate2(w.id(), "x_train", H5T_STD_U8LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
    REQUIRE(ds.ok());
  };
  huge({hsize_t{1} << 40, 28, 28, 1});
  check_error(spec_for(file), "'x_train' (data.train_images) has shape (1099511627776, 28, 28, 1): 3.06 PiB in memory, more than");
  huge({hsize_t{1} << 40, hsize_t{1} << 40, 1});
  check_error(spec_for(file), "'x_train' (data.train_images) has shape (1099511627776, 1099511627776, 1), too many elements");
  DataSpec two = with([](H5Writer& w) { valid(w); });
  two.num_classes = 2;
  check_error(two, "'y_train' (data.train_labels) has label 2, outside 0..1 (data.num_classes = 2)");
}

TEST_CASE("hdf5 data: a dense model trained on (N, features) float32 rows beats chance, checked against its input shape") {
  DataSpec synthetic;
  synthetic.dataset = "synthetic";
  synthetic.image_shape = Shape{8, 8, 1};
  synthetic.train_examples = 512;
  synthetic.test_examples = 128;
  const Splits data = load_dataset(synthetic, 9);
  const fs::path file = temp_file("train.h5");
  auto as_floats = [](const Dataset& d) { return std::vector<float>(d.pixels.begin(), d.pixels.end()); };
  auto as_i64 = [](const Dataset& d) { return std::vector<int64_t>(d.labels.begin(), d.labels.end()); };
  H5Writer(file)
      .add("x_train", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {512, 64}, as_floats(data.train))
      .labels("y_train", as_i64(data.train))
      .add("x_test", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {128, 64}, as_floats(data.test))
      .labels("y_test", as_i64(data.test));
  auto recipe = [&](const std::string& input_shape) {
    return parse_recipe(fmt::format(R"(
name = "h5"
[data]
dataset = "hdf5"
path = "{}"
[model]
input_shape = {}
layers = [
  {{ type = "rescaling", scale = 0.00392156862745098 }},
  {{ type = "dense", units = 32, activation = "relu" }},
  {{ type = "dense", units = 10 }},
]
[optimizer]
learning_rate = 0.01
[strategy]
per_replica_batch = 32
[train]
epochs = 4
tensorboard = false
)", file.string(), input_shape), "h5.toml");
  };
  const fs::path dir = fs::temp_directory_path() / "distrain_test_hdf5_run";
  fs::remove_all(dir);
  TrainOptions o;
  o.run_dir = dir.string();
  o.out = std::fopen("/dev/null", "w");
  const TrainSummary s = train(recipe("[64]"), o);
  CHECK(s.validated);
  CHECK(s.val_accuracy > 0.5);  // chance: 0.1
  CHECK_THROWS_WITH_AS(train(recipe("[63]"), o), doctest::Contains("model.input_shape (63,) does not match the data's examples (64,)"),
                       UserError);
}

}  // namespace distrain::test

namespace distrain::test {
namespace {

// Everything a checkpoint holds, read back on one device: trainable values, state
// (batch-norm moving statistics), optimizer slots and iteration count.
struct Saved {
  std::vector<float> values, state, slots;
  int64_t iterations = 0;
};
Saved read_saved(const Recipe& recipe, const std::string& ckpt) {
  Recipe single = recipe;
  single.strategy = StrategySpec{};
  auto strategy = make_strategy(single);
  load_weights(ckpt, strategy->model());
  load_optimizer(ckpt, strategy->model().params(), strategy->optimizer_state());
  Saved saved{to_host(strategy->model().params().values()), to_host(strategy->model().params().state()), {},
              strategy->optimizer().iterations()};
  for (const auto& [name, slot] : strategy->optimizer().slots()) {
    const std::vector<float> host = to_host(slot);
    saved.slots.insert(saved.slots.end(), host.begin(), host.end());
  }
  return saved;
}

}  // namespace

TEST_CASE("hdf5 data: one dataset of images alone, for predict, with the same checks") {
  const fs::path file = temp_file("predict.h5");
  {
    H5Writer w(file);
    valid(w);
  }
  const Dataset d = read_hdf5_images(file.string(), "x_test");
  CHECK(d.examples() == 2);
  CHECK(d.labels.empty());
  CHECK(d.example_shape == Shape{2, 3, 2});
  CHECK_THROWS_WITH_AS(read_hdf5_images(file.string(), "images"),
                       doctest::Contains("no dataset 'images' (--dataset); the file has x_test, x_train, y_test, y_train"),
                       UserError);
}

TEST_CASE("train.on_nonfinite = skip_step: a batch with a NaN pixel leaves weights, slots and batch-norm statistics as if "
          "it were not in the data") {
  DataSpec synthetic;
  synthetic.dataset = "synthetic";
  synthetic.image_shape = Shape{8, 8, 1};
  synthetic.train_examples = 256;
  synthetic.test_examples = 32;
  const Splits data = load_dataset(synthetic, 5);
  std::vector<float> pixels(data.train.pixels.begin(), data.train.pixels.end());
  std::vector<int64_t> labels(data.train.labels.begin(), data.train.labels.end());
  const std::vector<float> test_pixels(data.test.pixels.begin(), data.test.pixels.end());
  const std::vector<int64_t> test_labels(data.test.labels.begin(), data.test.labels.end());
  auto write = [&](const fs::path& file, const std::vector<float>& x, const std::vector<int64_t>& y) {
    H5Writer(file)
        .add("x_train", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {y.size(), 64}, x)
        .labels("y_train", y)
        .add("x_test", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {32, 64}, test_pixels)
        .labels("y_test", test_labels);
  };
  // Batch 3 of 16 (examples 32..47) holds a NaN; the reference data lacks that batch.
  std::vector<float> poisoned = pixels;
  poisoned[40 * 64 + 5] = std::numeric_limits<float>::quiet_NaN();
  const fs::path with_nan = temp_file("with_nan.h5"), without = temp_file("without_batch_3.h5");
  write(with_nan, poisoned, labels);
  pixels.erase(pixels.begin() + 32 * 64, pixels.begin() + 48 * 64);
  labels.erase(labels.begin() + 32, labels.begin() + 48);
  write(without, pixels, labels);

  for (const std::string strategy : {"name = \"one_device\"\nper_replica_batch = 16",
                                     "name = \"mirrored\"\ndevices = [\"cpu:0\", \"cpu:1\"]\nper_replica_batch = 8",
                                     "name = \"zero\"\nstage = 2\ndevices = [\"cpu:0\", \"cpu:1\"]\nper_replica_batch = 8"}) {
    CAPTURE(strategy);
    auto recipe = [&](const fs::path& file, const std::string& on_nonfinite) {
      return parse_recipe(fmt::format(R"(
name = "skip"
[data]
dataset = "hdf5"
path = "{}"
shuffle = false
[model]
input_shape = [64]
layers = [
  {{ type = "dense", units = 16, activation = "relu" }},
  {{ type = "batch_norm" }},
  {{ type = "dense", units = 10 }},
]
[optimizer]
type = "adam"
learning_rate = 0.01
[strategy]
{}
[train]
epochs = 1
validate = false
tensorboard = false
on_nonfinite = "{}"
)", file.string(), strategy, on_nonfinite), "skip.toml");
    };
    TrainOptions o;
    o.out = std::fopen("/dev/null", "w");
    o.run_dir = (fs::temp_directory_path() / "distrain_test_skip").string();
    o.fresh = true;
    const TrainSummary skipped = train(recipe(with_nan, "skip_step"), o);
    CHECK(skipped.steps == 16);
    CHECK(skipped.skipped_steps == 1);
    o.run_dir = (fs::temp_directory_path() / "distrain_test_skip_ref").string();
    const TrainSummary reference = train(recipe(without, "stop"), o);
    CHECK(reference.steps == 15);
    const Saved got = read_saved(recipe(without, "stop"), skipped.last_checkpoint);
    const Saved want = read_saved(recipe(without, "stop"), reference.last_checkpoint);
    CHECK(got.values == want.values);
    CHECK(got.state == want.state);
    CHECK(got.slots == want.slots);
    CHECK(got.iterations == 15);
    CHECK(want.iterations == 15);
    // The default stops at that step, naming it. (The NaN never reaches the loss: ReLU maps
    // it to 0; the first layer's kernel gradient holds it.)
    o.run_dir = (fs::temp_directory_path() / "distrain_test_skip_stop").string();
    CHECK_THROWS_WITH_AS(train(recipe(with_nan, "stop"), o), doctest::Contains("step 3: the gradients are not finite (the loss is)"),
                         UserError);
  }
  CHECK_THROWS_WITH_AS(parse_recipe("name = \"p\"\n[model]\ninput_shape = [4]\nlayers = [{ type = \"dense\", units = 2 }]\n"
                                    "[strategy]\nname = \"parameter_server\"\n[train]\non_nonfinite = \"skip_step\"\n",
                                    "p.toml"),
                       doctest::Contains("train.on_nonfinite: \"skip_step\" is not available under parameter_server"), UserError);
}

}  // namespace distrain::test
