#include "core/io/export_onnx.hpp"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>

#include "core/base/error.hpp"
#include "core/layers/padding.hpp"

namespace distrain {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kOpset = 17;  // the newest the Debian 12 ONNX library checks; has LayerNormalization

// A tensor of the graph: its name, its per-example shape as distrain sees it (NHWC), and
// whether it is held in ONNX's NCHW (image layers) instead.
struct Value {
  std::string name;
  Shape shape;
  bool nchw = false;
};

constexpr int64_t kBatchAxis = -1, kSequenceAxis = -2;  // dims named "batch", "sequence"

// (batch, per-example dims...); a token model's sequence, the first per-example dim, any length.
std::vector<int64_t> batched(const Shape& per_example, bool any_length) {
  std::vector<int64_t> dims{kBatchAxis};
  dims.insert(dims.end(), per_example.dims().begin(), per_example.dims().end());
  if (any_length) dims[1] = kSequenceAxis;
  return dims;
}

// Nodes and initializers of one graph, each output named uniquely after a hint.
class Graph {
 public:
  explicit Graph(onnx::GraphProto& graph) : graph_(graph) {}

  std::string constant(const std::string& hint, const std::vector<int64_t>& dims, const std::vector<float>& values) {
    onnx::TensorProto& t = *graph_.add_initializer();
    t.set_name(fresh(hint));
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t.add_dims(d);
    t.set_raw_data(values.data(), values.size() * sizeof(float));  // little-endian, as ONNX's raw_data
    return t.name();
  }
  std::string scalar(const std::string& hint, float v) { return constant(hint, {}, {v}); }
  std::string int64s(const std::string& hint, const std::vector<int64_t>& values) {
    onnx::TensorProto& t = *graph_.add_initializer();
    t.set_name(fresh(hint));
    t.set_data_type(onnx::TensorProto::INT64);
    t.add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t.add_int64_data(v);
    return t.name();
  }

  // A node of `op` with `outputs` outputs named after `hint`.
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs, const std::string& hint, int outputs = 1) {
    onnx::NodeProto& n = *graph_.add_node();
    n.set_op_type(op);
    n.set_name(fresh(hint + "/" + op));
    for (const std::string& in : inputs) n.add_input(in);
    for (int i = 0; i < outputs; ++i) n.add_output(fresh(hint + "/" + op + "_out"));
    return n;
  }
  std::string op(const std::string& op, const std::vector<std::string>& inputs, const std::string& hint) {
    return node(op, inputs, hint).output(0);
  }

  static void set(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& ints) {
    onnx::AttributeProto& a = *n.add_attribute();
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INTS);
    for (int64_t v : ints) a.add_ints(v);
  }
  static void set(onnx::NodeProto& n, const std::string& name, int64_t v) {
    onnx::AttributeProto& a = *n.add_attribute();
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(v);
  }
  static void set_float(onnx::NodeProto& n, const std::string& name, float v) {
    onnx::AttributeProto& a = *n.add_attribute();
    a.set_name(name);
    a.set_type(onnx::AttributeProto::FLOAT);
    a.set_f(v);
  }

 private:
  std::string fresh(const std::string& hint) { return fmt::format("{}_{}", hint, counter_++); }
  onnx::GraphProto& graph_;
  int64_t counter_ = 0;
};

// The layers as ONNX nodes, one layer at a time.
class Translator {
 public:
  Translator(const ExportedModel& model, onnx::GraphProto& graph) : model_(model), g_(graph) {}

  // The model's input value through every layer; the last layer's value.
  Value run(const Value& input) {
    for (const ExportedLayer& layer : model_.layers) {
      std::vector<Value> in;
      for (int i : layer.inputs) in.push_back(i < 0 ? input : values_.at(static_cast<size_t>(i)));
      values_.push_back(translate(layer, in));
      embeddings_[layer.name] = layer.type == "embedding" ? table_ : "";
    }
    return values_.back();
  }

  // A per-example (H, W, C) value in NCHW, and back.
  Value nchw(const Value& v, const std::string& hint) {
    if (v.nchw) return v;
    onnx::NodeProto& n = g_.node("Transpose", {v.name}, hint);
    Graph::set(n, "perm", std::vector<int64_t>{0, 3, 1, 2});
    return {n.output(0), v.shape, true};
  }
  Value nhwc(const Value& v, const std::string& hint) {
    if (!v.nchw) return v;
    onnx::NodeProto& n = g_.node("Transpose", {v.name}, hint);
    Graph::set(n, "perm", std::vector<int64_t>{0, 2, 3, 1});
    return {n.output(0), v.shape, false};
  }

 private:
  std::string weight(const ExportedLayer& layer, const std::string& name) {
    const ExportedVariable& v = layer.variable(name);
    return g_.constant(layer.name + "/" + name, v.shape.dims(), v.values);
  }
  // A variable that may be absent (bias without use_bias, gamma without scale): its
  // value, or `fill` of `size` values.
  std::string weight_or(const ExportedLayer& layer, const std::string& name, int64_t size, float fill) {
    if (layer.has(name)) return weight(layer, name);
    return g_.constant(layer.name + "/" + name, {size}, std::vector<float>(static_cast<size_t>(size), fill));
  }
  Value same_layout(const Value& in, const std::string& name) { return {name, in.shape, in.nchw}; }
  Value relu_if(const ExportedLayer& layer, const Value& v) {
    if (layer.settings.value("activation", "linear") != "relu") return v;
    return same_layout(v, g_.op("Relu", {v.name}, layer.name));
  }

  Value translate(const ExportedLayer& layer, const std::vector<Value>& in) {
    const std::string& t = layer.type;
    if (t == "conv2d") return conv2d(layer, in[0]);
    if (t == "max_pool2d" || t == "avg_pool2d") return pool2d(layer, in[0]);
    if (t == "dense") return dense(layer, in[0]);
    if (t == "batch_norm") return batch_norm(layer, in[0]);
    if (t == "flatten") return flatten(layer, in[0]);
    if (t == "global_avg_pool2d") return global_avg_pool2d(layer, in[0]);
    if (t == "rescaling") return rescaling(layer, in[0]);
    if (t == "dropout") return in[0];  // inference
    if (t == "relu") return same_layout(in[0], g_.op("Relu", {in[0].name}, layer.name));
    if (t == "gelu") return gelu(layer, in[0]);
    if (t == "add") return add(layer, in);
    if (t == "layer_norm") return layer_norm(layer, in[0]);
    if (t == "embedding") return embedding(layer, in[0]);
    if (t == "position_embedding") return position_embedding(layer, in[0]);
    if (t == "attention") return attention(layer, in[0]);
    refuse_layer("onnx", layer, "has no ONNX translation yet");
  }

  // ONNX's pads [top, left, bottom, right] for a window over (H, W, C).
  static std::vector<int64_t> pads(const Shape& in, const Json& s, const char* window) {
    const bool same = s.at("padding") == "same";
    const auto k = s.at(window).get<std::vector<int64_t>>(), st = s.at("strides").get<std::vector<int64_t>>();
    const Padding1D h = pad_1d(in[0], k[0], st[0], same), w = pad_1d(in[1], k[1], st[1], same);
    return {h.before, w.before, h.after, w.after};
  }

  Value conv2d(const ExportedLayer& layer, const Value& x) {
    const Value in = nchw(x, layer.name);
    const ExportedVariable& k = layer.variable("kernel");  // (kh, kw, in, out) -> ONNX's (out, in, kh, kw)
    const int64_t kh = k.shape[0], kw = k.shape[1], ci = k.shape[2], co = k.shape[3];
    std::vector<float> w(k.values.size());
    for (int64_t a = 0; a < kh; ++a)
      for (int64_t b = 0; b < kw; ++b)
        for (int64_t i = 0; i < ci; ++i)
          for (int64_t o = 0; o < co; ++o)
            w[static_cast<size_t>(((o * ci + i) * kh + a) * kw + b)] = k.values[static_cast<size_t>(((a * kw + b) * ci + i) * co + o)];
    std::vector<std::string> inputs{in.name, g_.constant(layer.name + "/kernel", {co, ci, kh, kw}, w)};
    if (layer.has("bias")) inputs.push_back(weight(layer, "bias"));
    onnx::NodeProto& n = g_.node("Conv", inputs, layer.name);
    Graph::set(n, "kernel_shape", std::vector<int64_t>{kh, kw});
    Graph::set(n, "strides", layer.settings.at("strides").get<std::vector<int64_t>>());
    Graph::set(n, "pads", pads(x.shape, layer.settings, "kernel_size"));
    return relu_if(layer, {n.output(0), layer.output, true});
  }

  Value pool2d(const ExportedLayer& layer, const Value& x) {
    const Value in = nchw(x, layer.name);
    const bool max = layer.type == "max_pool2d";
    onnx::NodeProto& n = g_.node(max ? "MaxPool" : "AveragePool", {in.name}, layer.name);
    Graph::set(n, "kernel_shape", layer.settings.at("pool_size").get<std::vector<int64_t>>());
    Graph::set(n, "strides", layer.settings.at("strides").get<std::vector<int64_t>>());
    Graph::set(n, "pads", pads(x.shape, layer.settings, "pool_size"));
    if (!max) Graph::set(n, "count_include_pad", int64_t{0});  // padded cells never count, as TensorFlow
    return {n.output(0), layer.output, true};
  }

  Value dense(const ExportedLayer& layer, const Value& x) {
    const Value in = nhwc(x, layer.name);
    const std::string tied = layer.settings.at("tied_to");
    std::string kernel;
    if (tied.empty()) {
      kernel = weight(layer, "kernel");
    } else {  // the embedding's (vocabulary, width) table, transposed
      onnx::NodeProto& n = g_.node("Transpose", {embeddings_.at(tied)}, layer.name);
      Graph::set(n, "perm", std::vector<int64_t>{1, 0});
      kernel = n.output(0);
    }
    std::string y;
    if (in.shape.rank() == 1) {
      std::vector<std::string> inputs{in.name, kernel};
      if (layer.has("bias")) inputs.push_back(weight(layer, "bias"));
      y = g_.op("Gemm", inputs, layer.name);
    } else {
      y = g_.op("MatMul", {in.name, kernel}, layer.name);
      if (layer.has("bias")) y = g_.op("Add", {y, weight(layer, "bias")}, layer.name);
    }
    return relu_if(layer, {y, layer.output, false});
  }

  Value batch_norm(const ExportedLayer& layer, const Value& x) {
    if (x.shape.rank() == 2) refuse_layer("onnx", layer, "normalises a sequence, which ONNX's BatchNormalization cannot (channels second)");
    const Value in = x.shape.rank() == 3 ? nchw(x, layer.name) : x;
    const int64_t c = x.shape[x.shape.rank() - 1];
    onnx::NodeProto& n = g_.node("BatchNormalization",
                                 {in.name, weight_or(layer, "gamma", c, 1.0f), weight_or(layer, "beta", c, 0.0f),
                                  weight(layer, "moving_mean"), weight(layer, "moving_variance")},
                                 layer.name);
    Graph::set_float(n, "epsilon", layer.settings.at("epsilon").get<float>());
    return {n.output(0), layer.output, in.nchw};
  }

  Value flatten(const ExportedLayer& layer, const Value& x) {
    const Value in = nhwc(x, layer.name);  // Keras's (H, W, C) order
    onnx::NodeProto& n = g_.node("Flatten", {in.name}, layer.name);
    Graph::set(n, "axis", int64_t{1});
    return {n.output(0), layer.output, false};
  }

  Value global_avg_pool2d(const ExportedLayer& layer, const Value& x) {
    const std::string pooled = g_.op("GlobalAveragePool", {nchw(x, layer.name).name}, layer.name);
    onnx::NodeProto& n = g_.node("Flatten", {pooled}, layer.name);
    Graph::set(n, "axis", int64_t{1});
    return {n.output(0), layer.output, false};
  }

  Value rescaling(const ExportedLayer& layer, const Value& x) {
    std::string y = g_.op("Mul", {x.name, g_.scalar(layer.name + "/scale", layer.settings.at("scale").get<float>())}, layer.name);
    const float offset = layer.settings.at("offset").get<float>();
    if (offset != 0.0f) y = g_.op("Add", {y, g_.scalar(layer.name + "/offset", offset)}, layer.name);
    return same_layout(x, y);
  }

  // GPT-2's 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  Value gelu(const ExportedLayer& layer, const Value& x) {
    const std::string& n = layer.name;
    const std::string cube = g_.op("Mul", {g_.op("Mul", {x.name, x.name}, n), x.name}, n);
    const std::string inner = g_.op("Add", {x.name, g_.op("Mul", {cube, g_.scalar(n + "/c", 0.044715f)}, n)}, n);
    const std::string t = g_.op("Tanh", {g_.op("Mul", {inner, g_.scalar(n + "/s", 0.7978845608028654f)}, n)}, n);
    const std::string half_x = g_.op("Mul", {x.name, g_.scalar(n + "/half", 0.5f)}, n);
    return same_layout(x, g_.op("Mul", {half_x, g_.op("Add", {t, g_.scalar(n + "/one", 1.0f)}, n)}, n));
  }

  Value add(const ExportedLayer& layer, const std::vector<Value>& in) {
    const Value b = in[0].nchw ? nchw(in[1], layer.name) : nhwc(in[1], layer.name);
    return same_layout(in[0], g_.op("Add", {in[0].name, b.name}, layer.name));
  }

  Value layer_norm(const ExportedLayer& layer, const Value& x) {
    const Value in = nhwc(x, layer.name);
    onnx::NodeProto& n = g_.node("LayerNormalization", {in.name, weight(layer, "gamma"), weight(layer, "beta")}, layer.name);
    Graph::set(n, "axis", int64_t{-1});
    Graph::set_float(n, "epsilon", layer.settings.at("epsilon").get<float>());
    return {n.output(0), layer.output, false};
  }

  Value embedding(const ExportedLayer& layer, const Value& ids) {
    table_ = weight(layer, "embeddings");
    return {g_.op("Gather", {table_, ids.name}, layer.name), layer.output, false};
  }

  // The table's first T rows, one per position of the (T, C) sequence, T the input's.
  Value position_embedding(const ExportedLayer& layer, const Value& x) {
    const std::string& n = layer.name;
    const std::string used = g_.op("Slice", {weight(layer, "embeddings"), g_.int64s(n + "/start", {0}), sequence_length(), g_.int64s(n + "/axis", {0})}, n);
    return {g_.op("Add", {x.name, used}, n), layer.output, false};
  }

  // Causal self-attention: one (C, 3C) projection to queries, keys and values (those
  // blocks of its columns, each split by heads), softmax(q k^T / sqrt(C/H) + mask) v per
  // head, then the (C, C) output projection.
  Value attention(const ExportedLayer& layer, const Value& x) {
    for (const char* llama_key : {"kv_heads", "rotary", "use_bias", "qkv_bias"})
      if (layer.settings.contains(llama_key))
        refuse_layer("onnx", layer, fmt::format("has {} (Llama's attention), which has no ONNX translation yet", llama_key));
    const std::string& n = layer.name;
    const int64_t c = x.shape[1], heads = layer.settings.at("heads").get<int64_t>(), d = c / heads;
    const std::string qkv = g_.op("Add", {g_.op("MatMul", {x.name, weight(layer, "qkv_kernel")}, n), weight(layer, "qkv_bias")}, n);
    onnx::NodeProto& split = g_.node("Split", {qkv, g_.int64s(n + "/split", {c, c, c})}, n, 3);
    Graph::set(split, "axis", int64_t{2});
    const std::string by_heads = g_.int64s(n + "/heads_shape", {0, 0, heads, d});  // 0: the input's extent
    const auto heads_first = [&](const std::string& v, std::vector<int64_t> perm) {
      onnx::NodeProto& tr = g_.node("Transpose", {g_.op("Reshape", {v, by_heads}, n)}, n);
      Graph::set(tr, "perm", perm);
      return tr.output(0);
    };
    const std::string q = heads_first(split.output(0), {0, 2, 1, 3});  // (N, H, T, D)
    const std::string k = heads_first(split.output(1), {0, 2, 3, 1});  // (N, H, D, T)
    const std::string v = heads_first(split.output(2), {0, 2, 1, 3});
    const std::string scores =
        g_.op("Add", {g_.op("Mul", {g_.op("MatMul", {q, k}, n), g_.scalar(n + "/scale", static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))))}, n),
                      causal_mask()},
              n);
    onnx::NodeProto& softmax = g_.node("Softmax", {scores}, n);
    Graph::set(softmax, "axis", int64_t{-1});
    onnx::NodeProto& back = g_.node("Transpose", {g_.op("MatMul", {softmax.output(0), v}, n)}, n);
    Graph::set(back, "perm", std::vector<int64_t>{0, 2, 1, 3});
    const std::string mixed = g_.op("Reshape", {back.output(0), g_.int64s(n + "/shape", {0, 0, c})}, n);
    const std::string y = g_.op("Add", {g_.op("MatMul", {mixed, weight(layer, "proj_kernel")}, n), weight(layer, "proj_bias")}, n);
    return {y, layer.output, false};
  }

  // The input's sequence length T as a 1-D int64 tensor, made once.
  const std::string& sequence_length() {
    if (sequence_.empty()) {
      onnx::NodeProto& shape = g_.node("Shape", {"input"}, "sequence_length");
      Graph::set(shape, "start", int64_t{1});
      Graph::set(shape, "end", int64_t{2});
      sequence_ = shape.output(0);
    }
    return sequence_;
  }

  // The (T, T) causal mask of the input's T, cut from one (L, L) constant (L: the model's
  // longest position table, or its input length), made once for every attention layer.
  const std::string& causal_mask() {
    if (!mask_.empty()) return mask_;
    const int64_t l = model_.longest_sequence();
    std::vector<float> mask(static_cast<size_t>(l * l), 0.0f);
    for (int64_t i = 0; i < l; ++i)
      for (int64_t j = i + 1; j < l; ++j) mask[static_cast<size_t>(i * l + j)] = std::numeric_limits<float>::lowest();
    const std::string t = sequence_length();
    onnx::NodeProto& ends = g_.node("Concat", {t, t}, "causal_mask");
    Graph::set(ends, "axis", int64_t{0});
    mask_ = g_.op("Slice", {g_.constant("causal_mask", {l, l}, mask), g_.int64s("causal_mask/start", {0, 0}), ends.output(0),
                            g_.int64s("causal_mask/axes", {0, 1})},
                  "causal_mask");
    return mask_;
  }

  const ExportedModel& model_;
  Graph g_;
  std::string sequence_, mask_;
  std::vector<Value> values_;
  std::map<std::string, std::string> embeddings_;  // an embedding layer's table initializer
  std::string table_;
};

void add_value_info(onnx::ValueInfoProto& info, const std::string& name, int32_t type, const std::vector<int64_t>& dims) {
  info.set_name(name);
  onnx::TypeProto::Tensor& tensor = *info.mutable_type()->mutable_tensor_type();
  tensor.set_elem_type(type);
  for (int64_t d : dims) {
    onnx::TensorShapeProto::Dimension& dim = *tensor.mutable_shape()->add_dim();
    if (d == kBatchAxis) dim.set_dim_param("batch");
    else if (d == kSequenceAxis) dim.set_dim_param("sequence");
    else dim.set_dim_value(d);
  }
}

onnx::ModelProto onnx_model(const ExportedModel& model) {
  onnx::ModelProto proto;
  proto.set_ir_version(onnx::IR_VERSION);
  proto.set_producer_name("distrain");
  proto.set_producer_version(DISTRAIN_VERSION);
  onnx::OperatorSetIdProto& opset = *proto.add_opset_import();
  opset.set_domain("");
  opset.set_version(kOpset);
  onnx::GraphProto& graph = *proto.mutable_graph();
  graph.set_name(model.name.empty() ? "distrain" : model.name);
  const bool ids = model.input_dtype == DType::i32;  // token ids: a sequence of any length up to the model's positions
  add_value_info(*graph.add_input(), "input", ids ? onnx::TensorProto::INT32 : onnx::TensorProto::FLOAT,
                 batched(model.input_shape, ids));
  Translator translator(model, graph);
  const Value last = translator.nhwc(translator.run({"input", model.input_shape, false}), "output");
  onnx::NodeProto& out = *graph.add_node();
  out.set_op_type("Identity");
  out.set_name("output");
  out.add_input(last.name);
  out.add_output("logits");
  add_value_info(*graph.add_output(), "logits", onnx::TensorProto::FLOAT, batched(last.shape, ids));
  return proto;
}

// Writes `tmp` with `write` (the final name `path` in messages).
void write_file(const std::string& tmp, const std::string& path, const std::function<bool(std::ofstream&)>& write) {
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  DT_USER_CHECK(out.good(), "{}: cannot create ({})", path, std::strerror(errno));
  DT_USER_CHECK(write(out) && out.flush().good(), "{}: cannot write (disk full?)", path);
}

// ONNX's external data: every initializer of 1 KiB or more moves into the file `tmp`
// (to be renamed `data_path`, beside the model), each at a 4 KiB-aligned offset so that a
// runtime can map it, and the graph keeps where.
void move_weights_out(onnx::ModelProto& proto, const std::string& tmp, const std::string& data_path) {
  constexpr int64_t kAlign = 4096;
  const std::string location = fs::path(data_path).filename().string();
  write_file(tmp, data_path, [&](std::ofstream& out) {
    int64_t offset = 0;
    for (onnx::TensorProto& t : *proto.mutable_graph()->mutable_initializer()) {
      const auto length = static_cast<int64_t>(t.raw_data().size());
      if (length < 1024) continue;
      const int64_t start = (offset + kAlign - 1) / kAlign * kAlign;
      out << std::string(static_cast<size_t>(start - offset), '\0');
      out.write(t.raw_data().data(), length);
      offset = start + length;
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      for (const auto& [key, value] : {std::pair<std::string, std::string>{"location", location},
                                       {"offset", std::to_string(start)},
                                       {"length", std::to_string(length)}}) {
        onnx::StringStringEntryProto& e = *t.add_external_data();
        e.set_key(key);
        e.set_value(value);
      }
    }
    return out.good();
  });
}

}  // namespace

bool write_onnx(const ExportedModel& model, const std::string& path, bool external_data) {
  onnx::ModelProto proto = onnx_model(model);
  try {
    onnx::checker::check_model(proto);
  } catch (const std::exception& e) {
    DT_CHECK(false, "the ONNX graph distrain made fails ONNX's checker: {}", e.what());
  }
  // Protobuf serialises at most 2 GiB: a larger model keeps its weights beside the graph.
  const bool side_file = external_data || proto.ByteSizeLong() > static_cast<size_t>(std::numeric_limits<int32_t>::max());
  const std::string data_path = path + ".data", tmp = path + ".tmp", data_tmp = data_path + ".tmp";
  try {
    if (side_file) move_weights_out(proto, data_tmp, data_path);
    write_file(tmp, path, [&](std::ofstream& out) { return proto.SerializeToOstream(&out); });
  } catch (...) {
    fs::remove(tmp);
    fs::remove(data_tmp);
    throw;
  }
  std::error_code ec, ignored;
  if (side_file) fs::rename(data_tmp, data_path, ec);
  if (!ec) fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ignored), fs::remove(data_tmp, ignored);
  DT_USER_CHECK(!ec, "{}: cannot write ({})", path, ec.message());
  return side_file;
}

}  // namespace distrain
