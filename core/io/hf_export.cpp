// write_hf_model (hf_model.hpp): a GPT-2- or Llama-shaped model found by its layers' order
// (embedding, [position table,] blocks of norm, attention, residual add, norm, MLP,
// residual add, then a norm and the head), its tensors named and laid out as transformers'
// GPT2LMHeadModel or LlamaForCausalLM (Qwen2ForCausalLM with biases on q, k and v only).
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/base/error.hpp"
#include "core/io/hf_layout.hpp"
#include "core/io/hf_model.hpp"

namespace distrain {

namespace {

namespace fs = std::filesystem;

// A float setting as its shortest decimal (1e-05, not 9.99999974737875e-06).
double shortest(const Json& value) { return std::stod(fmt::format("{}", value.get<float>())); }

const char* torch_dtype(StDType t) { return t == StDType::f32 ? "float32" : (t == StDType::bf16 ? "bfloat16" : "float16"); }

// One transformer block's layers, by position after the block's input.
struct Block {
  const ExportedLayer *norm1, *attention, *norm2;
  std::vector<const ExportedLayer*> mlp;  // gated_mlp; or dense, gelu, dense
};

class BlockFinder {
 public:
  BlockFinder(const ExportedModel& m, bool llama) : m_(m), llama_(llama) {}

  // The blocks from layer `first`; `end` receives the index past the last.
  std::vector<Block> blocks(size_t first, size_t& end) const {
    std::vector<Block> out;
    size_t i = first;
    const std::string norm = llama_ ? "rms_norm" : "layer_norm";
    const size_t span = llama_ ? 6 : 8;
    while (i + span <= m_.layers.size() && m_.layers[i].type == norm && m_.layers[i + 1].type == "attention") {
      const int input = static_cast<int>(i) - 1;
      expect(i + 2, "add", {input, static_cast<int>(i + 1)});
      expect(i + 3, norm, {static_cast<int>(i + 2)});
      Block b{&m_.layers[i], &m_.layers[i + 1], &m_.layers[i + 3], {}};
      if (llama_) {
        expect(i + 4, "gated_mlp", {static_cast<int>(i + 3)});
        expect(i + 5, "add", {static_cast<int>(i + 2), static_cast<int>(i + 4)});
        b.mlp = {&m_.layers[i + 4]};
      } else {
        expect(i + 4, "dense", {static_cast<int>(i + 3)});
        expect(i + 5, "gelu", {static_cast<int>(i + 4)});
        expect(i + 6, "dense", {static_cast<int>(i + 5)});
        expect(i + 7, "add", {static_cast<int>(i + 2), static_cast<int>(i + 6)});
        b.mlp = {&m_.layers[i + 4], &m_.layers[i + 6]};
      }
      out.push_back(b);
      i += span;
    }
    end = i;
    return out;
  }

  void expect(size_t i, const std::string& type, std::vector<int> inputs) const {
    if (i >= m_.layers.size()) throw UserError("export --format hf: the model ends inside a transformer block");
    const ExportedLayer& l = m_.layers[i];
    std::vector<int> got = l.inputs;
    std::sort(got.begin(), got.end());
    std::sort(inputs.begin(), inputs.end());
    if (l.type != type || got != inputs)
      refuse_layer("hf", l, fmt::format("is not where a {} block has its {}", llama_ ? "Llama" : "GPT-2", type));
  }

 private:
  const ExportedModel& m_;
  bool llama_;
};

struct Tensors {
  StDType dtype;
  std::vector<StTensor> list;
  void add(const std::string& name, const Shape& shape, const std::vector<float>& values) {
    DT_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "hf tensor {}", name);
    list.push_back(StTensor{name, dtype, shape, st_bytes(values, dtype)});
  }
};

const std::vector<float>& values(const ExportedLayer& l, const std::string& name) { return l.variable(name).values; }

Json gpt2_tensors(const ExportedModel& m, Tensors& t) {
  const ExportedLayer &wte = m.layers.at(0), &wpe = m.layers.at(1);
  const int64_t vocab = wte.variable("embeddings").shape[0], c = wte.variable("embeddings").shape[1];
  const int64_t positions = wpe.variable("embeddings").shape[0];
  size_t end = 0;
  const std::vector<Block> blocks = BlockFinder(m, false).blocks(2, end);
  if (blocks.empty()) refuse_layer("hf", m.layers.at(2), "does not start a GPT-2 block (layer_norm, attention, ...)");
  if (end + 2 != m.layers.size() || m.layers[end].type != "layer_norm" || m.layers[end + 1].type != "dense")
    refuse_layer("hf", m.layers.at(std::min(end, m.layers.size() - 1)), "is not GPT-2's final layer_norm and head");
  const ExportedLayer &ln_f = m.layers[end], &head = m.layers[end + 1];
  if (head.settings.value("tied_to", "") != wte.name) refuse_layer("hf", head, "is not tied to the token embedding, as GPT-2's head is");
  t.add("transformer.wte.weight", Shape{vocab, c}, values(wte, "embeddings"));
  t.add("transformer.wpe.weight", Shape{positions, c}, values(wpe, "embeddings"));
  const ExportedLayer& first_fc = *blocks[0].mlp[0];
  const int64_t inner = first_fc.variable("kernel").shape[1], heads = blocks[0].attention->settings.at("heads");
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Block& b = blocks[i];
    const Json& s = b.attention->settings;
    if (s.contains("kv_heads") || s.contains("rotary") || s.contains("use_bias") || s.contains("qkv_bias"))
      refuse_layer("hf", *b.attention, "has Llama's attention keys in a GPT-2 model");
    const std::string p = fmt::format("transformer.h.{}.", i);
    t.add(p + "ln_1.weight", Shape{c}, values(*b.norm1, "gamma"));
    t.add(p + "ln_1.bias", Shape{c}, values(*b.norm1, "beta"));
    t.add(p + "attn.c_attn.weight", Shape{c, 3 * c}, values(*b.attention, "qkv_kernel"));
    t.add(p + "attn.c_attn.bias", Shape{3 * c}, values(*b.attention, "qkv_bias"));
    t.add(p + "attn.c_proj.weight", Shape{c, c}, values(*b.attention, "proj_kernel"));
    t.add(p + "attn.c_proj.bias", Shape{c}, values(*b.attention, "proj_bias"));
    t.add(p + "ln_2.weight", Shape{c}, values(*b.norm2, "gamma"));
    t.add(p + "ln_2.bias", Shape{c}, values(*b.norm2, "beta"));
    for (const ExportedLayer* d : b.mlp)
      if (!d->has("bias") || d->settings.value("activation", "linear") != "linear")
        refuse_layer("hf", *d, "is not GPT-2's MLP projection (a bias, no activation)");
    t.add(p + "mlp.c_fc.weight", Shape{c, inner}, values(*b.mlp[0], "kernel"));
    t.add(p + "mlp.c_fc.bias", Shape{inner}, values(*b.mlp[0], "bias"));
    t.add(p + "mlp.c_proj.weight", Shape{inner, c}, values(*b.mlp[1], "kernel"));
    t.add(p + "mlp.c_proj.bias", Shape{c}, values(*b.mlp[1], "bias"));
  }
  t.add("transformer.ln_f.weight", Shape{c}, values(ln_f, "gamma"));
  t.add("transformer.ln_f.bias", Shape{c}, values(ln_f, "beta"));
  const double dropout = blocks[0].attention->settings.value("dropout", 0.0);
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", vocab},
          {"n_embd", c},
          {"n_head", heads},
          {"n_layer", blocks.size()},
          {"n_positions", positions},
          {"n_ctx", positions},
          {"n_inner", inner},
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", shortest(ln_f.settings.at("epsilon"))},
          {"attn_pdrop", dropout},
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"tie_word_embeddings", true},
          {"torch_dtype", torch_dtype(t.dtype)}};
}

Json llama_tensors(const ExportedModel& m, Tensors& t) {
  const ExportedLayer& embed = m.layers.at(0);
  const int64_t vocab = embed.variable("embeddings").shape[0], c = embed.variable("embeddings").shape[1];
  size_t end = 0;
  const std::vector<Block> blocks = BlockFinder(m, true).blocks(1, end);
  if (blocks.empty()) refuse_layer("hf", m.layers.at(1), "does not start a Llama block (rms_norm, attention, ...)");
  if (end + 2 != m.layers.size() || m.layers[end].type != "rms_norm" || m.layers[end + 1].type != "dense")
    refuse_layer("hf", m.layers.at(std::min(end, m.layers.size() - 1)), "is not Llama's final rms_norm and head");
  const ExportedLayer &norm = m.layers[end], &head = m.layers[end + 1];
  const bool tied = !head.settings.value("tied_to", "").empty();
  if (head.has("bias") || head.settings.value("activation", "linear") != "linear" || (tied && head.settings["tied_to"] != embed.name))
    refuse_layer("hf", head, "is not a Llama head (no bias, no activation, tied to the token embedding if tied)");
  const Json& a0 = blocks[0].attention->settings;
  const int64_t heads = a0.at("heads"), kv = a0.value("kv_heads", heads), d = c / heads;
  const bool use_bias = a0.value("use_bias", true), qkv_bias = a0.value("qkv_bias", use_bias);
  const Json& mlp0 = blocks[0].mlp[0]->settings;
  const int64_t ffn = mlp0.at("units");
  const bool mlp_bias = mlp0.at("use_bias");
  const bool qwen = qkv_bias && !use_bias;
  if (use_bias && !qkv_bias) refuse_layer("hf", *blocks[0].attention, "has an output bias without q/k/v biases, which no transformers model has");
  if (qwen && mlp_bias) refuse_layer("hf", *blocks[0].mlp[0], "has biases, which Qwen2's MLP has not");
  t.add("model.embed_tokens.weight", Shape{vocab, c}, values(embed, "embeddings"));
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Block& b = blocks[i];
    const Json& s = b.attention->settings;
    if (!s.value("rotary", false) || s.at("heads") != heads || s.value("kv_heads", heads) != kv ||
        s.value("use_bias", true) != use_bias || s.value("qkv_bias", s.value("use_bias", true)) != qkv_bias ||
        s.value("rope_theta", 0.0) != a0.value("rope_theta", 0.0) || s.value("rope_scaling", Json()) != a0.value("rope_scaling", Json()))
      refuse_layer("hf", *b.attention, "differs from the first block's attention or has no rotary positions: transformers' Llama has one shape for all");
    if (b.mlp[0]->settings != mlp0) refuse_layer("hf", *b.mlp[0], "differs from the first block's MLP");
    const std::string p = fmt::format("model.layers.{}.", i);
    t.add(p + "input_layernorm.weight", Shape{c}, values(*b.norm1, "gamma"));
    t.add(p + "post_attention_layernorm.weight", Shape{c}, values(*b.norm2, "gamma"));
    const HfAttention a = from_distrain(values(*b.attention, "qkv_kernel"),
                                        qkv_bias ? &values(*b.attention, "qkv_bias") : nullptr,
                                        values(*b.attention, "proj_kernel"), c, HeadOrder{heads, kv}, d);
    t.add(p + "self_attn.q_proj.weight", Shape{heads * d, c}, a.q);
    t.add(p + "self_attn.k_proj.weight", Shape{kv * d, c}, a.k);
    t.add(p + "self_attn.v_proj.weight", Shape{kv * d, c}, a.v);
    t.add(p + "self_attn.o_proj.weight", Shape{c, heads * d}, a.o);
    if (qkv_bias) {
      t.add(p + "self_attn.q_proj.bias", Shape{heads * d}, a.q_bias);
      t.add(p + "self_attn.k_proj.bias", Shape{kv * d}, a.k_bias);
      t.add(p + "self_attn.v_proj.bias", Shape{kv * d}, a.v_bias);
    }
    if (use_bias) t.add(p + "self_attn.o_proj.bias", Shape{c}, values(*b.attention, "proj_bias"));
    const std::vector<float>& gate_up = values(*b.mlp[0], "gate_up_kernel");
    std::vector<float> gate(static_cast<size_t>(c * ffn)), up(gate.size());
    for (int64_t r = 0; r < c; ++r) {
      std::copy_n(gate_up.begin() + r * 2 * ffn, ffn, gate.begin() + r * ffn);
      std::copy_n(gate_up.begin() + r * 2 * ffn + ffn, ffn, up.begin() + r * ffn);
    }
    t.add(p + "mlp.gate_proj.weight", Shape{ffn, c}, transposed(gate, c, ffn));
    t.add(p + "mlp.up_proj.weight", Shape{ffn, c}, transposed(up, c, ffn));
    t.add(p + "mlp.down_proj.weight", Shape{c, ffn}, transposed(values(*b.mlp[0], "down_kernel"), ffn, c));
    if (mlp_bias) {
      const std::vector<float>& gb = values(*b.mlp[0], "gate_up_bias");
      t.add(p + "mlp.gate_proj.bias", Shape{ffn}, std::vector<float>(gb.begin(), gb.begin() + ffn));
      t.add(p + "mlp.up_proj.bias", Shape{ffn}, std::vector<float>(gb.begin() + ffn, gb.end()));
      t.add(p + "mlp.down_proj.bias", Shape{c}, values(*b.mlp[0], "down_bias"));
    }
  }
  t.add("model.norm.weight", Shape{c}, values(norm, "gamma"));
  if (!tied) t.add("lm_head.weight", Shape{vocab, c}, transposed(values(head, "kernel"), c, vocab));
  Json config = {{"architectures", {qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
                 {"model_type", qwen ? "qwen2" : "llama"},
                 {"vocab_size", vocab},
                 {"hidden_size", c},
                 {"intermediate_size", ffn},
                 {"num_attention_heads", heads},
                 {"num_key_value_heads", kv},
                 {"num_hidden_layers", blocks.size()},
                 {"head_dim", d},
                 {"hidden_act", mlp0.at("activation") == "silu" ? "silu" : "gelu_pytorch_tanh"},
                 {"max_position_embeddings", m.input_shape[0]},
                 {"rms_norm_eps", shortest(norm.settings.at("epsilon"))},
                 {"rope_theta", a0.value("rope_theta", 10000.0)},
                 {"rope_scaling", nullptr},
                 {"attention_dropout", a0.value("dropout", 0.0)},
                 {"tie_word_embeddings", tied},
                 {"torch_dtype", torch_dtype(t.dtype)}};
  if (!qwen) {
    config["attention_bias"] = use_bias;
    config["mlp_bias"] = mlp_bias;
  } else {
    config["use_sliding_window"] = false;
  }
  // Both forms: transformers 5's rope_parameters and the earlier rope_theta / rope_scaling.
  Json rope = {{"rope_theta", a0.value("rope_theta", 10000.0)}, {"rope_type", "default"}};
  if (a0.contains("rope_scaling")) {
    Json s = a0["rope_scaling"];
    s.erase("type");
    s["rope_type"] = "llama3";
    config["rope_scaling"] = s;
    rope.update(s);
  }
  config["rope_parameters"] = rope;
  return config;
}

// The tensors in files of at most shard_bytes each (one tensor may exceed it alone).
std::vector<std::vector<const StTensor*>> shards(const std::vector<StTensor>& list, uint64_t shard_bytes) {
  std::vector<std::vector<const StTensor*>> out(1);
  uint64_t bytes = 0;
  for (const StTensor& t : list) {
    if (!out.back().empty() && bytes + t.bytes.size() > shard_bytes) {
      out.emplace_back();
      bytes = 0;
    }
    out.back().push_back(&t);
    bytes += t.bytes.size();
  }
  return out;
}

void write_json(const fs::path& path, const Json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw UserError(fmt::format("{}: cannot write", path.string()));
}

}  // namespace

std::vector<std::string> write_hf_model(const ExportedModel& model, const std::string& dir, StDType dtype,
                                        uint64_t shard_bytes) {
  if (model.layers.empty() || model.layers[0].type != "embedding" || model.input_dtype != DType::i32)
    throw UserError("export --format hf: the model does not start with a token embedding (GPT-2 or Llama shape)");
  Tensors t{dtype, {}};
  const bool gpt2 = model.layers.size() > 1 && model.layers[1].type == "position_embedding";
  const Json config = gpt2 ? gpt2_tensors(model, t) : llama_tensors(model, t);
  fs::create_directories(dir);
  std::vector<std::string> written;
  write_json(fs::path(dir) / "config.json", config);
  written.push_back((fs::path(dir) / "config.json").string());
  const auto groups = shards(t.list, shard_bytes);
  const std::map<std::string, std::string> metadata{{"format", "pt"}};
  if (groups.size() == 1) {
    write_safetensors((fs::path(dir) / "model.safetensors").string(), t.list, metadata);
    written.push_back((fs::path(dir) / "model.safetensors").string());
    return written;
  }
  Json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", Json::object()}};
  uint64_t total = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, groups.size());
    std::vector<StTensor> part;
    for (const StTensor* s : groups[i]) {
      part.push_back(*s);
      index["weight_map"][s->name] = name;
      total += s->bytes.size();
    }
    write_safetensors((fs::path(dir) / name).string(), part, metadata);
    written.push_back((fs::path(dir) / name).string());
  }
  index["metadata"]["total_size"] = total;
  write_json(fs::path(dir) / "model.safetensors.index.json", index);
  written.push_back((fs::path(dir) / "model.safetensors.index.json").string());
  return written;
}

}  // namespace distrain
