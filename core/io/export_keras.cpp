#include "core/io/export_keras.hpp"

#include <zip.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/base/error.hpp"
#include "core/io/h5_write.hpp"

namespace distrain {

namespace fs = std::filesystem;

namespace {

// A Functional model's name for its input (the InputLayer Keras makes).
constexpr const char* kInputName = "input_layer";

// A distrain layer type as Keras: its class, the name Keras's weights files give its
// group (the class in snake case), and its variables in Keras's order.
struct KerasLayer {
  const char* class_name;
  const char* group;
  std::vector<const char*> variables;
};

const std::map<std::string, KerasLayer>& keras_layers() {
  static const std::map<std::string, KerasLayer> layers{
      {"rescaling", {"Rescaling", "rescaling", {}}},
      {"conv2d", {"Conv2D", "conv2d", {"kernel", "bias"}}},
      {"dense", {"Dense", "dense", {"kernel", "bias"}}},
      {"max_pool2d", {"MaxPooling2D", "max_pooling2d", {}}},
      {"avg_pool2d", {"AveragePooling2D", "average_pooling2d", {}}},
      {"batch_norm", {"BatchNormalization", "batch_normalization", {"gamma", "beta", "moving_mean", "moving_variance"}}},
      {"flatten", {"Flatten", "flatten", {}}},
      {"dropout", {"Dropout", "dropout", {}}},
      {"relu", {"ReLU", "re_lu", {}}},
      {"global_avg_pool2d", {"GlobalAveragePooling2D", "global_average_pooling2d", {}}},
      {"layer_norm", {"LayerNormalization", "layer_normalization", {"gamma", "beta"}}},
      {"embedding", {"Embedding", "embedding", {"embeddings"}}},
      {"add", {"Add", "add", {}}},
  };
  return layers;
}

const KerasLayer& keras_layer(const ExportedLayer& layer) {
  const auto it = keras_layers().find(layer.type);
  if (it == keras_layers().end()) refuse_layer("keras", layer, "has no Keras layer of the same function");
  if (layer.type == "dense" && !layer.settings.value("tied_to", "").empty())
    refuse_layer("keras", layer, "is tied to an embedding, which a Keras Dense layer cannot be");
  return it->second;
}

void check_exportable(const ExportedModel& model) {
  for (const ExportedLayer& layer : model.layers) keras_layer(layer);
}

// The Keras arguments of a layer, from its distrain settings.
Json keras_arguments(const ExportedLayer& layer) {
  const Json& s = layer.settings;
  Json c{{"name", layer.name}, {"trainable", true}, {"dtype", "float32"}};
  const auto copy = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys) c[k] = s.at(k);
  };
  if (layer.type == "rescaling") copy({"scale", "offset"});
  if (layer.type == "conv2d") {
    copy({"filters", "kernel_size", "strides", "padding", "activation", "use_bias"});
    c["data_format"] = "channels_last";
  }
  if (layer.type == "dense") copy({"units", "activation", "use_bias"});
  if (layer.type == "max_pool2d" || layer.type == "avg_pool2d") {
    copy({"pool_size", "strides", "padding"});
    c["data_format"] = "channels_last";
  }
  if (layer.type == "batch_norm") {
    c["axis"] = -1;
    copy({"momentum", "epsilon", "center", "scale"});
  }
  if (layer.type == "dropout") copy({"rate"});
  if (layer.type == "layer_norm") {
    c["axis"] = -1;
    copy({"epsilon"});
  }
  if (layer.type == "embedding") copy({"input_dim", "output_dim"});
  if (layer.type == "flatten" || layer.type == "global_avg_pool2d") c["data_format"] = "channels_last";
  return c;
}

Json batch_shape(const Shape& per_example) {
  Json shape = Json::array({nullptr});
  for (int64_t d : per_example.dims()) shape.push_back(d);
  return shape;
}

std::string model_name(const std::string& name) {
  std::string out = name.empty() ? "distrain" : name;
  for (char& ch : out)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-' && ch != '.') ch = '_';
  return out;
}

// Keras's weights layout: /layers/<group>/vars/<i>, a group per layer named after its
// class (the first conv2d, then conv2d_1, ...), and /vars for the model's own (none).
void write_weights(const ExportedModel& model, const std::string& path) {
  H5Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  DT_USER_CHECK(file.ok(), "{}: cannot create ({})", path, errno ? std::strerror(errno) : "HDF5 refused it");
  H5Id layers(ensure_group(file, "layers"), H5Gclose);
  std::map<std::string, int> seen;
  if (!model.chain()) {  // a Functional model's layers start with its InputLayer, which holds nothing
    H5Id group(ensure_group(layers, kInputName), H5Gclose);
    H5Id vars(ensure_group(group, "vars"), H5Gclose);
    write_attr_str(vars, "name", kInputName);
    seen[kInputName] = 1;
  }
  for (const ExportedLayer& layer : model.layers) {
    const KerasLayer& k = keras_layer(layer);
    const int n = seen[k.group]++;
    H5Id group(ensure_group(layers, n ? fmt::format("{}_{}", k.group, n) : k.group), H5Gclose);
    H5Id vars(ensure_group(group, "vars"), H5Gclose);
    write_attr_str(vars, "name", layer.name);
    int index = 0;
    for (const char* name : k.variables)
      if (layer.has(name)) {
        const ExportedVariable& v = layer.variable(name);
        write_f32_dataset(vars, std::to_string(index++), v.shape, v.values);
      }
  }
  H5Id own(ensure_group(file, "vars"), H5Gclose);
  write_attr_str(own, "name", model_name(model.name));
  DT_USER_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL) >= 0, "{}: cannot write (disk full?)", path);
}

// The .keras archive: zip entries from memory and from the weights file beside it.
void write_archive(const ExportedModel& model, const std::string& path, const std::string& weights) {
  int error = 0;
  zip_t* zip = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
  if (!zip) {
    zip_error_t why;
    zip_error_init_with_code(&why, error);
    const std::string text = zip_error_strerror(&why);
    zip_error_fini(&why);
    throw UserError(fmt::format("{}: cannot create ({})", path, text));
  }
  const std::string config = keras_config(model).dump();
  const std::string metadata = Json{{"keras_version", "3.0.0"}, {"exported_by", "distrain " DISTRAIN_VERSION}}.dump();
  const auto add = [&](const char* entry, zip_source_t* source) {
    if (source && zip_file_add(zip, entry, source, ZIP_FL_OVERWRITE) >= 0) return true;
    zip_source_free(source);  // not taken by the archive
    return false;
  };
  const bool added = add("metadata.json", zip_source_buffer(zip, metadata.data(), metadata.size(), 0)) &&
                     add("config.json", zip_source_buffer(zip, config.data(), config.size(), 0)) &&
                     add("model.weights.h5", zip_source_file(zip, weights.c_str(), 0, -1));
  const std::string why = added ? "" : zip_strerror(zip);
  if (!added) zip_discard(zip);
  DT_USER_CHECK(added, "{}: cannot write ({})", path, why);
  if (zip_close(zip) != 0) {
    const std::string text = zip_strerror(zip);
    zip_discard(zip);
    throw UserError(fmt::format("{}: cannot write ({})", path, text));
  }
}

// What a Functional model's layer is called with: the tensor it reads, or the list of
// them (add), each named by the layer that made it.
Json call_arguments(const ExportedModel& model, const ExportedLayer& layer) {
  Json tensors = Json::array();
  for (int i : layer.inputs) {
    const bool input = i < 0;
    const Shape& shape = input ? model.input_shape : model.layers[static_cast<size_t>(i)].output;
    const bool ids = input && model.input_dtype == DType::i32;
    tensors.push_back({{"class_name", "__keras_tensor__"},
                       {"config",
                        {{"shape", batch_shape(shape)},
                         {"dtype", ids ? "int32" : "float32"},
                         {"keras_history", Json::array({input ? kInputName : model.layers[static_cast<size_t>(i)].name, 0, 0})}}}});
  }
  return tensors.size() == 1 ? tensors[0] : tensors;
}

}  // namespace

Json keras_config(const ExportedModel& model) {
  check_exportable(model);
  const bool sequential = model.chain();
  Json input{{"module", "keras.layers"},
             {"class_name", "InputLayer"},
             {"config",
              {{"batch_shape", batch_shape(model.input_shape)},
               {"dtype", model.input_dtype == DType::i32 ? "int32" : "float32"},
               {"name", kInputName}}},
             {"registered_name", nullptr}};
  if (!sequential) {
    input["name"] = kInputName;
    input["inbound_nodes"] = Json::array();
  }
  Json layers = Json::array({input});
  for (const ExportedLayer& layer : model.layers) {
    Json entry{{"module", "keras.layers"},
               {"class_name", keras_layer(layer).class_name},
               {"config", keras_arguments(layer)},
               {"registered_name", nullptr}};
    if (!sequential) {
      entry["name"] = layer.name;
      entry["inbound_nodes"] = Json::array({{{"args", Json::array({call_arguments(model, layer)})}, {"kwargs", Json::object()}}});
    }
    layers.push_back(std::move(entry));
  }
  Json config{{"name", model_name(model.name)}, {"trainable", true}, {"dtype", "float32"}, {"layers", layers}};
  if (sequential)
    return {{"module", "keras"},
            {"class_name", "Sequential"},
            {"config", config},
            {"registered_name", nullptr},
            {"build_config", {{"input_shape", batch_shape(model.input_shape)}}},
            {"compile_config", nullptr}};
  config["input_layers"] = Json::array({kInputName, 0, 0});
  config["output_layers"] = Json::array({model.layers.back().name, 0, 0});
  return {{"module", "keras.src.models.functional"},
          {"class_name", "Functional"},
          {"config", config},
          {"registered_name", "Functional"},
          {"build_config", {{"input_shape", nullptr}}},
          {"compile_config", nullptr}};
}

void write_keras(const ExportedModel& model, const std::string& path) {
  const bool archive = path.ends_with(".keras");
  DT_USER_CHECK(archive || path.ends_with(".weights.h5"),
                "--out {}: a Keras export is FILE.keras (the whole model) or FILE.weights.h5 (its weights, for "
                "model.load_weights)", path);
  check_exportable(model);
  const std::string tmp = path + ".tmp", weights = path + ".weights.tmp";
  const auto discard = [&] {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    fs::remove(weights, ignored);
  };
  try {
    errno = 0;
    write_weights(model, archive ? weights : tmp);
    if (archive) write_archive(model, tmp, weights);
  } catch (const Error& e) {  // named as the file asked for, not its temporary; HDF5 leaves only errno
    const int err = errno;
    discard();
    throw UserError(fmt::format("{}: cannot write ({})", path, err ? std::strerror(err) : e.what()));
  } catch (...) {
    discard();
    throw;
  }
  fs::remove(weights);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) discard();
  DT_USER_CHECK(!ec, "{}: cannot write ({})", path, ec.message());
}

}  // namespace distrain
