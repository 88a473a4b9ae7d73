// The exporters without a framework to read them back (e2e_export does that with
// onnxruntime and Keras): Keras's weights layout and config, the ONNX graph read back with
// ONNX's own classes, and the refusals.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/base/h5_id.hpp"
#include "core/io/export_keras.hpp"
#include "core/io/export_onnx.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

const char* kCnn = R"(
name = "cnn"
[data]
dataset = "synthetic"
train_examples = 64
test_examples = 16
image_shape = [6, 6, 1]
[model]
input_shape = [6, 6, 1]
layers = [
  { type = "conv2d", name = "first", filters = 4, kernel_size = 3, padding = "same", activation = "relu" },
  { type = "batch_norm" },
  { type = "conv2d", filters = 2, kernel_size = [2, 3], use_bias = false },
  { type = "flatten" },
  { type = "dense", units = 3 },
]
)";

ExportedModel view_of(const std::string& recipe_text) {
  const Recipe recipe = parse_recipe(recipe_text, "export.toml");
  auto strategy = make_strategy(recipe);
  return export_view(strategy->model(), recipe.name);
}

std::vector<float> read_dataset(const std::string& file, const std::string& path, std::vector<hsize_t>& dims) {
  H5Id f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  H5Id ds(H5Dopen2(f, path.c_str(), H5P_DEFAULT), H5Dclose);
  REQUIRE(ds.ok());
  H5Id space(H5Dget_space(ds), H5Sclose);
  dims.resize(static_cast<size_t>(H5Sget_simple_extent_ndims(space)));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  std::vector<float> values(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
  REQUIRE(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
  return values;
}

}  // namespace

TEST_CASE("export keras: the weights in Keras's layout, groups named by class, variables in Keras's order") {
  const ExportedModel m = view_of(kCnn);
  const std::string file = (fs::temp_directory_path() / "distrain_export_test.weights.h5").string();
  write_keras(m, file);
  std::vector<hsize_t> dims;
  CHECK(read_dataset(file, "layers/conv2d/vars/0", dims) == m.layers[0].variable("kernel").values);
  CHECK(dims == std::vector<hsize_t>{3, 3, 1, 4});
  CHECK(read_dataset(file, "layers/conv2d_1/vars/0", dims) == m.layers[2].variable("kernel").values);  // no bias
  CHECK(dims == std::vector<hsize_t>{2, 3, 4, 2});
  CHECK(read_dataset(file, "layers/batch_normalization/vars/3", dims) == m.layers[1].variable("moving_variance").values);
  CHECK(read_dataset(file, "layers/dense/vars/1", dims) == m.layers[4].variable("bias").values);
  fs::remove(file);
}

TEST_CASE("export keras: the Sequential config says Keras's classes and arguments") {
  const Json c = keras_config(view_of(kCnn));
  CHECK(c["class_name"] == "Sequential");
  const Json& layers = c["config"]["layers"];
  REQUIRE(layers.size() == 6);
  CHECK(layers[0]["config"]["batch_shape"] == Json::parse("[null, 6, 6, 1]"));
  CHECK(layers[1]["class_name"] == "Conv2D");
  CHECK(layers[1]["config"]["name"] == "first");
  CHECK(layers[1]["config"]["padding"] == "same");
  CHECK(layers[1]["config"]["activation"] == "relu");
  CHECK(layers[3]["config"]["kernel_size"] == Json::parse("[2, 3]"));
  CHECK(layers[3]["config"]["use_bias"] == false);
  CHECK(layers[2]["class_name"] == "BatchNormalization");
  CHECK(layers[5]["config"]["units"] == 3);
}

TEST_CASE("export keras: a graph is a Functional model, each layer called on the tensors it reads") {
  std::string residual = kCnn;
  residual.replace(residual.find("{ type = \"flatten\" },"), 21,
                   "{ type = \"conv2d\", name = \"same\", filters = 2, kernel_size = 1 }, "
                   "{ type = \"add\", name = \"skip\", inputs = [\"conv2d_1\", \"same\"] }, { type = \"flatten\" },");
  const Json c = keras_config(view_of(residual));
  CHECK(c["class_name"] == "Functional");
  const Json& layers = c["config"]["layers"];
  CHECK(layers[0]["name"] == "input_layer");
  CHECK(layers[1]["inbound_nodes"][0]["args"][0]["config"]["keras_history"] == Json::parse(R"(["input_layer", 0, 0])"));
  const Json& add = layers[5];
  CHECK(add["class_name"] == "Add");
  REQUIRE(add["inbound_nodes"][0]["args"][0].size() == 2);
  CHECK(add["inbound_nodes"][0]["args"][0][1]["config"]["keras_history"][0] == "same");
  CHECK(add["inbound_nodes"][0]["args"][0][1]["config"]["shape"] == Json::parse("[null, 5, 4, 2]"));
  CHECK(c["config"]["output_layers"] == Json::parse(R"(["dense_1", 0, 0])"));
}

TEST_CASE("export keras: a layer Keras has no counterpart for is refused naming it") {
  std::string gelu = kCnn;
  gelu.replace(gelu.find("{ type = \"flatten\" },"), 21, "{ type = \"flatten\" }, { type = \"gelu\" },");
  const std::string dir = (fs::temp_directory_path() / "distrain_export_refused.keras").string();
  CHECK_THROWS_WITH_AS(write_keras(view_of(gelu), dir), "export --format keras: layer 'gelu_1' (gelu) has no Keras layer of the same function",
                       UserError);
  CHECK_THROWS_WITH_AS(write_keras(view_of(kCnn), dir + ".zip"), doctest::Contains("a Keras export is FILE.keras"), UserError);
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("export onnx: a graph ONNX's checker accepts, NCHW inside, the kernel transposed, read back") {
  const ExportedModel m = view_of(kCnn);
  const std::string file = (fs::temp_directory_path() / "distrain_export_test.onnx").string();
  write_onnx(m, file);
  onnx::ModelProto proto;
  std::ifstream in(file, std::ios::binary);
  REQUIRE(proto.ParseFromIstream(&in));
  CHECK(proto.opset_import(0).version() == 17);
  const onnx::GraphProto& g = proto.graph();
  CHECK(g.input(0).name() == "input");
  CHECK(g.input(0).type().tensor_type().shape().dim_size() == 4);
  CHECK(g.output(0).name() == "logits");
  std::vector<std::string> ops;
  for (const auto& n : g.node()) ops.push_back(n.op_type());
  CHECK(ops.front() == "Transpose");  // NHWC -> NCHW once, and back before flatten
  CHECK(std::count(ops.begin(), ops.end(), "Transpose") == 2);
  CHECK(std::count(ops.begin(), ops.end(), "Conv") == 2);
  const onnx::TensorProto* w = nullptr;
  for (const auto& t : g.initializer())
    if (t.name().rfind("first/kernel", 0) == 0) w = &t;
  REQUIRE(w);
  CHECK(std::vector<int64_t>(w->dims().begin(), w->dims().end()) == std::vector<int64_t>{4, 1, 3, 3});  // (out, in, kh, kw)
  std::vector<float> values(w->raw_data().size() / sizeof(float));
  std::memcpy(values.data(), w->raw_data().data(), w->raw_data().size());
  const std::vector<float>& keras = m.layers[0].variable("kernel").values;  // (kh, kw, in, out)
  CHECK(values[((3 * 1 + 0) * 3 + 2) * 3 + 1] == keras[((2 * 3 + 1) * 1 + 0) * 4 + 3]);  // out 3, in 0, kh 2, kw 1
  fs::remove(file);
}

TEST_CASE("export onnx: a token model takes a sequence of any length up to its position table") {
  const std::string src = DISTRAIN_SOURCE_DIR;
  const Recipe gpt = load_recipe(src + "/recipes/shakespeare_char_gpt.toml", {"data.path=\"" + src + "/data/tiny_shakespeare.txt\""});
  auto strategy = make_strategy(gpt);
  const std::string file = (fs::temp_directory_path() / "distrain_export_gpt.onnx").string();
  write_onnx(export_view(strategy->model(), gpt.name), file);
  onnx::ModelProto proto;
  std::ifstream in(file, std::ios::binary);
  REQUIRE(proto.ParseFromIstream(&in));
  const auto& dims = proto.graph().input(0).type().tensor_type().shape();
  CHECK(dims.dim(0).dim_param() == "batch");
  CHECK(dims.dim(1).dim_param() == "sequence");
  CHECK(proto.graph().input(0).type().tensor_type().elem_type() == onnx::TensorProto::INT32);
  CHECK(proto.graph().output(0).type().tensor_type().shape().dim(2).dim_value() == 65);
  int shapes = 0;
  for (const auto& n : proto.graph().node()) shapes += n.op_type() == "Shape";
  CHECK(shapes == 1);  // one sequence length, one causal mask for every block
  fs::remove(file);
}

}  // namespace distrain::test
