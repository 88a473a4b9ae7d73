#include "core/io/hf_model.hpp"
#include "core/io/hf_layout.hpp"

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "core/base/error.hpp"
#include "core/base/json.hpp"

namespace distrain {

namespace {

namespace fs = std::filesystem;

// A model folder's tensors, wherever they are stored, each taken once.
class HfFolder {
 public:
  explicit HfFolder(const std::string& dir) : dir_(dir) {
    const fs::path config = fs::path(dir) / "config.json";
    std::ifstream in(config);
    if (!in) throw UserError(fmt::format("{}: no config.json (a Hugging Face model folder has one)", dir));
    config_ = Json::parse(in, nullptr, false);
    if (!config_.is_object()) throw UserError(fmt::format("{}: not a JSON object", config.string()));
    config_path_ = config.string();
    const fs::path single = fs::path(dir) / "model.safetensors", index = fs::path(dir) / "model.safetensors.index.json";
    if (fs::exists(index)) {
      read_index(index.string());
    } else if (fs::exists(single)) {
      add_file(single.string());
    } else {
      throw UserError(fmt::format("{}: neither model.safetensors nor model.safetensors.index.json (distrain reads "
                                  "safetensors, not pytorch_model.bin)",
                                  dir));
    }
  }

  const Json& config() const { return config_; }
  const std::string& config_path() const { return config_path_; }

  // config.json's `key`, or fallback where absent or null.
  template <typename T>
  T get(const std::string& key, T fallback) const {
    if (!config_.contains(key) || config_[key].is_null()) return fallback;
    try {
      return config_[key].get<T>();
    } catch (const nlohmann::json::exception&) {
      throw UserError(fmt::format("{}: {}: has the wrong type ({})", config_path_, key, config_[key].dump()));
    }
  }
  template <typename T>
  T need(const std::string& key) const {
    if (!config_.contains(key) || config_[key].is_null()) throw UserError(fmt::format("{}: {}: missing", config_path_, key));
    return get<T>(key, T{});
  }
  [[noreturn]] void refuse(const std::string& key, const std::string& why) const {
    throw UserError(fmt::format("{}: {}: {}", config_path_, key, why));
  }

  bool has(const std::string& name) const { return where_.contains(name); }
  // The tensor's values (float32), checked against the shape the config implies.
  std::vector<float> take(const std::string& name, const Shape& shape) {
    const auto it = where_.find(name);
    if (it == where_.end()) throw UserError(fmt::format("{}: no tensor '{}' (config.json implies it)", dir_, name));
    const SafetensorsFile& file = *it->second;
    const StEntry& e = file.entry(name);
    if (e.shape != shape)
      throw UserError(fmt::format("{}: tensor '{}' is {}, config.json implies {}", file.path(), name, e.shape.str(), shape.str()));
    taken_.insert(name);
    ++dtypes_[e.dtype];
    return file.floats(name);
  }
  // Every tensor taken, but buffers transformers recomputes (`ignorable` suffixes).
  void check_all_taken(const std::vector<std::string>& ignorable) const {
    for (const auto& [name, file] : where_) {
      if (taken_.contains(name)) continue;
      bool ignore = false;
      for (const std::string& s : ignorable) ignore = ignore || name.ends_with(s);
      if (!ignore)
        throw UserError(fmt::format("{}: tensor '{}' has no place in the model config.json describes (unsupported key)",
                                    file->path(), name));
    }
  }
  StDType main_dtype() const {
    StDType best = StDType::f32;
    int64_t most = -1;
    for (const auto& [t, n] : dtypes_)
      if (n > most) most = n, best = t;
    return best;
  }
  int64_t taken() const { return static_cast<int64_t>(taken_.size()); }

 private:
  void read_index(const std::string& path) {
    std::ifstream in(path);
    const Json index = Json::parse(in, nullptr, false);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      throw UserError(fmt::format("{}: weight_map: missing (not a safetensors index)", path));
    std::map<std::string, std::shared_ptr<SafetensorsFile>> files;
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
        throw UserError(fmt::format("{}: weight_map.{}: not a file name beside the index", path, name));
      const std::string shard = (fs::path(dir_) / file.get<std::string>()).string();
      if (!files.contains(shard)) {
        if (!fs::exists(shard)) throw UserError(fmt::format("{}: weight_map.{}: shard {} is missing", path, name, shard));
        files[shard] = std::make_shared<SafetensorsFile>(shard);
      }
      if (!files[shard]->has(name)) throw UserError(fmt::format("{}: has no tensor '{}' (the index says it has)", shard, name));
      where_[name] = files[shard];
    }
  }
  void add_file(const std::string& path) {
    auto file = std::make_shared<SafetensorsFile>(path);
    for (const auto& [name, e] : file->entries()) where_[name] = file;
  }

  std::string dir_, config_path_;
  Json config_;
  std::map<std::string, std::shared_ptr<SafetensorsFile>> where_;
  std::set<std::string> taken_;
  std::map<StDType, int64_t> dtypes_;
};

int64_t context_of(int64_t context, int64_t asked) { return asked > 0 ? asked : std::min<int64_t>(context, 1024); }

HfImport import_gpt2(HfFolder& f, int64_t seq_len) {
  const auto c = f.need<int64_t>("n_embd"), heads = f.need<int64_t>("n_head"), layers = f.need<int64_t>("n_layer");
  const auto vocab = f.need<int64_t>("vocab_size"), positions = f.get<int64_t>("n_positions", 1024);
  const auto inner = f.get<int64_t>("n_inner", 4 * c);
  const auto eps = f.get<double>("layer_norm_epsilon", 1e-5);
  if (const auto act = f.get<std::string>("activation_function", "gelu_new"); act != "gelu_new")
    f.refuse("activation_function", fmt::format("\"{}\": distrain's GPT-2 has GELU's tanh form (gelu_new) only", act));
  if (!f.get<bool>("scale_attn_weights", true)) f.refuse("scale_attn_weights", "false: distrain scales by 1/sqrt(d)");
  if (f.get<bool>("scale_attn_by_inverse_layer_idx", false)) f.refuse("scale_attn_by_inverse_layer_idx", "true: not supported");
  if (c % heads != 0) f.refuse("n_head", fmt::format("{} does not divide n_embd = {}", heads, c));
  HfImport m;
  m.architecture = "gpt2";
  m.vocab_size = vocab;
  m.seq_len = context_of(positions, seq_len);
  if (m.seq_len > positions) f.refuse("n_positions", fmt::format("{} positions, fewer than --seq-len {}", positions, m.seq_len));
  const std::string p = f.has("wte.weight") ? "" : "transformer.";
  m.values["wte/embeddings"] = f.take(p + "wte.weight", Shape{vocab, c});
  m.values["wpe/embeddings"] = f.take(p + "wpe.weight", Shape{positions, c});
  for (int64_t i = 0; i < layers; ++i) {
    const std::string hf = fmt::format("{}h.{}.", p, i), at = fmt::format("h.{}.", i);
    for (const char* ln : {"ln_1", "ln_2"}) {
      m.values[at + ln + "/gamma"] = f.take(hf + ln + ".weight", Shape{c});
      m.values[at + ln + "/beta"] = f.take(hf + ln + ".bias", Shape{c});
    }
    m.values[at + "attn/qkv_kernel"] = f.take(hf + "attn.c_attn.weight", Shape{c, 3 * c});
    m.values[at + "attn/qkv_bias"] = f.take(hf + "attn.c_attn.bias", Shape{3 * c});
    m.values[at + "attn/proj_kernel"] = f.take(hf + "attn.c_proj.weight", Shape{c, c});
    m.values[at + "attn/proj_bias"] = f.take(hf + "attn.c_proj.bias", Shape{c});
    m.values[at + "fc/kernel"] = f.take(hf + "mlp.c_fc.weight", Shape{c, inner});
    m.values[at + "fc/bias"] = f.take(hf + "mlp.c_fc.bias", Shape{inner});
    m.values[at + "proj/kernel"] = f.take(hf + "mlp.c_proj.weight", Shape{inner, c});
    m.values[at + "proj/bias"] = f.take(hf + "mlp.c_proj.bias", Shape{c});
  }
  m.values["ln_f/gamma"] = f.take(p + "ln_f.weight", Shape{c});
  m.values["ln_f/beta"] = f.take(p + "ln_f.bias", Shape{c});
  if (f.has("lm_head.weight") && f.take("lm_head.weight", Shape{vocab, c}) != m.values["wte/embeddings"])
    throw UserError(fmt::format("{}: lm_head.weight differs from wte.weight: distrain's GPT-2 ties them", f.config_path()));
  f.check_all_taken({".attn.bias", ".attn.masked_bias"});
  m.model_toml = fmt::format(R"([model]
input_shape = [{seq}]

[[model.layers]]
type = "embedding"
name = "wte"
input_dim = {vocab}
output_dim = {c}

[[model.layers]]
type = "position_embedding"
name = "wpe"
max_length = {positions}

[[model.layers]]
type = "repeat"
name = "h"
count = {layers}

  [[model.layers.layers]]
  type = "layer_norm"
  name = "ln_1"
  epsilon = {eps}

  [[model.layers.layers]]
  type = "attention"
  name = "attn"
  heads = {heads}

  [[model.layers.layers]]
  type = "add"
  name = "attn_add"
  inputs = ["input", "attn"]

  [[model.layers.layers]]
  type = "layer_norm"
  name = "ln_2"
  epsilon = {eps}

  [[model.layers.layers]]
  type = "dense"
  name = "fc"
  units = {inner}
  kernel_initializer = "normal"

  [[model.layers.layers]]
  type = "gelu"

  [[model.layers.layers]]
  type = "dense"
  name = "proj"
  units = {c}
  kernel_initializer = "gpt2_residual"

  [[model.layers.layers]]
  type = "add"
  name = "mlp_add"
  inputs = ["attn_add", "proj"]

[[model.layers]]
type = "layer_norm"
name = "ln_f"
epsilon = {eps}

[[model.layers]]
type = "dense"
name = "head"
units = {vocab}
tied_to = "wte"
use_bias = false
)",
                             fmt::arg("seq", m.seq_len), fmt::arg("vocab", vocab), fmt::arg("c", c),
                             fmt::arg("positions", positions), fmt::arg("layers", layers), fmt::arg("eps", eps),
                             fmt::arg("heads", heads), fmt::arg("inner", inner));
  return m;
}

// The rotary settings: transformers 5's rope_parameters, or the earlier rope_theta and
// rope_scaling; as the attention layer's keys (rope_theta and Llama 3's rope_scaling).
std::string rotary_toml(const HfFolder& f) {
  const Json& c = f.config();
  const bool v5 = c.contains("rope_parameters") && c["rope_parameters"].is_object();
  const Json none = Json::object();
  const Json& p = v5 ? c["rope_parameters"] : (c.contains("rope_scaling") && c["rope_scaling"].is_object() ? c["rope_scaling"] : none);
  const std::string key = v5 ? "rope_parameters" : "rope_scaling";
  double theta = f.get<double>("rope_theta", 10000.0);
  if (v5 && p.contains("rope_theta") && p["rope_theta"].is_number()) theta = p["rope_theta"].get<double>();
  const std::string type = p.value("rope_type", p.value("type", "default"));
  if (type == "default") return fmt::format("rope_theta = {}", theta);
  if (type != "llama3") f.refuse(key, fmt::format("rope_type \"{}\": distrain has Llama 3's scaling only", type));
  const auto number = [&](const char* name, double fallback) {
    return p.contains(name) && p[name].is_number() ? p[name].get<double>() : fallback;
  };
  return fmt::format("rope_theta = {}\n  rope_scaling = {{ factor = {}, low_freq_factor = {}, high_freq_factor = {}, "
                     "original_max_position_embeddings = {} }}",
                     theta, number("factor", 8.0), number("low_freq_factor", 1.0), number("high_freq_factor", 4.0),
                     static_cast<int64_t>(number("original_max_position_embeddings", 8192)));
}

HfImport import_llama(HfFolder& f, const std::string& type, int64_t seq_len) {
  const auto c = f.need<int64_t>("hidden_size"), ffn = f.need<int64_t>("intermediate_size");
  const auto heads = f.need<int64_t>("num_attention_heads"), layers = f.need<int64_t>("num_hidden_layers");
  const auto kv = f.get<int64_t>("num_key_value_heads", heads), vocab = f.need<int64_t>("vocab_size");
  const auto context = f.get<int64_t>("max_position_embeddings", 2048);
  const auto eps = f.get<double>("rms_norm_eps", 1e-6);
  if (f.get<int64_t>("pretraining_tp", 1) != 1) f.refuse("pretraining_tp", "not 1: distrain has no sliced projections");
  const bool tied = f.get<bool>("tie_word_embeddings", false);
  if (heads <= 0 || c % heads != 0) f.refuse("num_attention_heads", fmt::format("{} does not divide hidden_size = {}", heads, c));
  if (kv <= 0 || heads % kv != 0) f.refuse("num_key_value_heads", fmt::format("{} does not divide num_attention_heads = {}", kv, heads));
  const int64_t d = c / heads;
  if (f.get<int64_t>("head_dim", d) != d)
    f.refuse("head_dim", fmt::format("{}: distrain's heads are hidden_size / num_attention_heads = {} wide", f.get<int64_t>("head_dim", d), d));
  const auto act = f.get<std::string>("hidden_act", "silu");
  if (act != "silu" && act != "gelu_pytorch_tanh")
    f.refuse("hidden_act", fmt::format("\"{}\": distrain's gated MLP takes silu or gelu_pytorch_tanh", act));
  const bool qwen = type == "qwen2";
  if (qwen && f.get<bool>("use_sliding_window", false)) f.refuse("use_sliding_window", "true: distrain attends over the whole window");
  HfImport m;
  m.architecture = type;
  m.vocab_size = vocab;
  m.seq_len = context_of(context, seq_len);
  if (type == "mistral" && f.get<int64_t>("sliding_window", 0) > 0 && f.get<int64_t>("sliding_window", 0) < m.seq_len)
    f.refuse("sliding_window", fmt::format("{} positions, fewer than the sequence {}: distrain attends over all of it",
                                           f.get<int64_t>("sliding_window", 0), m.seq_len));
  const bool attention_bias = !qwen && f.get<bool>("attention_bias", false), mlp_bias = f.get<bool>("mlp_bias", false);
  const bool qkv_bias = qwen || attention_bias;
  const HeadOrder order{heads, kv};
  m.values["embed_tokens/embeddings"] = f.take("model.embed_tokens.weight", Shape{vocab, c});
  for (int64_t i = 0; i < layers; ++i) {
    const std::string hf = fmt::format("model.layers.{}.", i), at = fmt::format("layers.{}.", i);
    m.values[at + "input_layernorm/gamma"] = f.take(hf + "input_layernorm.weight", Shape{c});
    m.values[at + "post_attention_layernorm/gamma"] = f.take(hf + "post_attention_layernorm.weight", Shape{c});
    HfAttention a;
    a.q = f.take(hf + "self_attn.q_proj.weight", Shape{heads * d, c});
    a.k = f.take(hf + "self_attn.k_proj.weight", Shape{kv * d, c});
    a.v = f.take(hf + "self_attn.v_proj.weight", Shape{kv * d, c});
    a.o = f.take(hf + "self_attn.o_proj.weight", Shape{c, heads * d});
    if (qkv_bias) {
      a.q_bias = f.take(hf + "self_attn.q_proj.bias", Shape{heads * d});
      a.k_bias = f.take(hf + "self_attn.k_proj.bias", Shape{kv * d});
      a.v_bias = f.take(hf + "self_attn.v_proj.bias", Shape{kv * d});
    }
    to_distrain(a, c, order, d, m.values[at + "self_attn/qkv_kernel"], m.values[at + "self_attn/qkv_bias"],
                m.values[at + "self_attn/proj_kernel"]);
    if (!qkv_bias) m.values.erase(at + "self_attn/qkv_bias");
    if (attention_bias) m.values[at + "self_attn/proj_bias"] = f.take(hf + "self_attn.o_proj.bias", Shape{c});
    const std::vector<float> gate = transposed(f.take(hf + "mlp.gate_proj.weight", Shape{ffn, c}), ffn, c);
    const std::vector<float> up = transposed(f.take(hf + "mlp.up_proj.weight", Shape{ffn, c}), ffn, c);
    std::vector<float>& gate_up = m.values[at + "mlp/gate_up_kernel"];
    gate_up.resize(static_cast<size_t>(c * 2 * ffn));
    for (int64_t r = 0; r < c; ++r) {
      std::copy_n(gate.begin() + r * ffn, ffn, gate_up.begin() + r * 2 * ffn);
      std::copy_n(up.begin() + r * ffn, ffn, gate_up.begin() + r * 2 * ffn + ffn);
    }
    m.values[at + "mlp/down_kernel"] = transposed(f.take(hf + "mlp.down_proj.weight", Shape{c, ffn}), c, ffn);
    if (mlp_bias) {
      std::vector<float> b = f.take(hf + "mlp.gate_proj.bias", Shape{ffn});
      const std::vector<float> ub = f.take(hf + "mlp.up_proj.bias", Shape{ffn});
      b.insert(b.end(), ub.begin(), ub.end());
      m.values[at + "mlp/gate_up_bias"] = b;
      m.values[at + "mlp/down_bias"] = f.take(hf + "mlp.down_proj.bias", Shape{c});
    }
  }
  m.values["norm/gamma"] = f.take("model.norm.weight", Shape{c});
  if (!tied) m.values["lm_head/kernel"] = transposed(f.take("lm_head.weight", Shape{vocab, c}), vocab, c);
  f.check_all_taken({"rotary_emb.inv_freq"});
  const std::string attention_keys =
      fmt::format("heads = {}\n  kv_heads = {}\n  rotary = true\n  {}\n  use_bias = {}{}", heads, kv, rotary_toml(f),
                  attention_bias, qkv_bias && !attention_bias ? "\n  qkv_bias = true" : "");
  const std::string head = tied ? "tied_to = \"embed_tokens\"" : "kernel_initializer = \"normal\"";
  m.model_toml = fmt::format(R"([model]
input_shape = [{seq}]

[[model.layers]]
type = "embedding"
name = "embed_tokens"
input_dim = {vocab}
output_dim = {c}

[[model.layers]]
type = "repeat"
name = "layers"
count = {layers}

  [[model.layers.layers]]
  type = "rms_norm"
  name = "input_layernorm"
  epsilon = {eps}

  [[model.layers.layers]]
  type = "attention"
  name = "self_attn"
  {attention}

  [[model.layers.layers]]
  type = "add"
  name = "attn_add"
  inputs = ["input", "self_attn"]

  [[model.layers.layers]]
  type = "rms_norm"
  name = "post_attention_layernorm"
  epsilon = {eps}

  [[model.layers.layers]]
  type = "gated_mlp"
  name = "mlp"
  units = {ffn}
  activation = "{act}"
  use_bias = {mlp_bias}

  [[model.layers.layers]]
  type = "add"
  name = "mlp_add"
  inputs = ["attn_add", "mlp"]

[[model.layers]]
type = "rms_norm"
name = "norm"
epsilon = {eps}

[[model.layers]]
type = "dense"
name = "lm_head"
units = {vocab}
use_bias = false
{head}
)",
                             fmt::arg("seq", m.seq_len), fmt::arg("vocab", vocab), fmt::arg("c", c),
                             fmt::arg("layers", layers), fmt::arg("eps", eps), fmt::arg("attention", attention_keys),
                             fmt::arg("ffn", ffn), fmt::arg("act", act == "silu" ? "silu" : "gelu"),
                             fmt::arg("mlp_bias", mlp_bias), fmt::arg("head", head));
  return m;
}

}  // namespace

HfImport read_hf_model(const std::string& dir, int64_t seq_len) {
  HfFolder f(dir);
  const auto type = f.need<std::string>("model_type");
  HfImport m;
  if (type == "gpt2")
    m = import_gpt2(f, seq_len);
  else if (type == "llama" || type == "mistral" || type == "qwen2")
    m = import_llama(f, type, seq_len);
  else
    f.refuse("model_type", fmt::format("\"{}\": distrain imports gpt2, llama, mistral and qwen2", type));
  m.dtype = f.main_dtype();
  m.tensors = f.taken();
  return m;
}

}  // namespace distrain
