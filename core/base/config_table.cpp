#include "core/base/config_table.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "core/base/edit_distance.hpp"
#include "core/base/error.hpp"

namespace distrain {

namespace {
const toml::table& empty_table() {
  static const toml::table t;
  return t;
}
}  // namespace

ConfigTable::ConfigTable(const toml::table& table, std::string file, std::string prefix)
    : table_(table), file_(std::move(file)), prefix_(std::move(prefix)) {}

std::string ConfigTable::where(const std::string& key) const {
  const toml::node* n = table_.get(key);
  const auto line = n ? n->source().begin.line : 0;
  const std::string* set_by = n ? n->source().path.get() : nullptr;  // "--set KEY=VALUE" for an override
  return set_by && set_by->starts_with("--set ") ? *set_by : line ? fmt::format("{}:{}", file_, line) : file_;
}

void ConfigTable::fail(const std::string& key, const std::string& message) const {
  throw UserError(fmt::format("{}: {}{}: {}", where(key), prefix_, key, message));
}

const toml::node* ConfigTable::lookup(const std::string& key) {
  used_.insert(key);
  return table_.get(key);
}

const toml::node* ConfigTable::raw(const std::string& key) { return lookup(key); }

int64_t ConfigTable::get_int(const std::string& key, std::optional<int64_t> fallback) {
  const toml::node* n = lookup(key);
  if (!n) {
    if (!fallback) fail(key, "missing (required)");
    return *fallback;
  }
  if (!n->is_integer()) fail(key, "expected an integer");
  return n->as_integer()->get();
}

double ConfigTable::get_float(const std::string& key, std::optional<double> fallback) {
  const toml::node* n = lookup(key);
  if (!n) {
    if (!fallback) fail(key, "missing (required)");
    return *fallback;
  }
  if (n->is_integer()) return static_cast<double>(n->as_integer()->get());
  if (!n->is_floating_point()) fail(key, "expected a number");
  const double v = n->as_floating_point()->get();
  // Range checks written as `x < 0 || x >= 1` are false for NaN, so no key may see one.
  if (!std::isfinite(v)) fail(key, fmt::format("expected a finite number, not {}", v));
  return v;
}

bool ConfigTable::get_bool(const std::string& key, bool fallback) {
  const toml::node* n = lookup(key);
  if (!n) return fallback;
  if (!n->is_boolean()) fail(key, "expected true or false");
  return n->as_boolean()->get();
}

std::string ConfigTable::get_string(const std::string& key, std::optional<std::string> fallback) {
  const toml::node* n = lookup(key);
  if (!n) {
    if (!fallback) fail(key, "missing (required)");
    return *fallback;
  }
  if (!n->is_string()) fail(key, "expected a string");
  return n->as_string()->get();
}

std::string ConfigTable::get_choice(const std::string& key, const std::string& fallback,
                                    const std::vector<std::string>& allowed) {
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "\"" : ", \"") + a + "\"";
  const toml::node* n = lookup(key);
  if (!n) return fallback;
  if (!n->is_string()) fail(key, "expected one of " + list);
  const std::string v = n->as_string()->get();
  for (const auto& a : allowed)
    if (a == v) return v;
  fail(key, fmt::format("'{}' is not one of {}", v, list));
}

std::array<int64_t, 2> ConfigTable::get_pair(const std::string& key, std::optional<std::array<int64_t, 2>> fallback) {
  const toml::node* n = lookup(key);
  if (!n) {
    if (!fallback) fail(key, "missing (required)");
    return *fallback;
  }
  if (n->is_integer()) return {n->as_integer()->get(), n->as_integer()->get()};
  const toml::array* a = n->as_array();
  if (!a || a->size() != 2 || !(*a)[0].is_integer() || !(*a)[1].is_integer())
    fail(key, "expected an integer or a pair of integers [h, w]");
  return {(*a)[0].as_integer()->get(), (*a)[1].as_integer()->get()};
}

std::vector<int64_t> ConfigTable::get_int_list(const std::string& key, std::optional<std::vector<int64_t>> fallback) {
  const toml::node* n = lookup(key);
  if (!n) {
    if (!fallback) fail(key, "missing (required)");
    return *fallback;
  }
  const toml::array* a = n->as_array();
  if (!a) fail(key, "expected an array of integers");
  std::vector<int64_t> out;
  for (const auto& e : *a) {
    if (!e.is_integer()) fail(key, "expected an array of integers");
    out.push_back(e.as_integer()->get());
  }
  return out;
}

std::vector<std::string> ConfigTable::get_string_list(const std::string& key, std::vector<std::string> fallback) {
  const toml::node* n = lookup(key);
  if (!n) return fallback;
  if (n->is_string()) return {n->as_string()->get()};
  const toml::array* a = n->as_array();
  if (!a || a->empty()) fail(key, "expected a string or a non-empty array of strings");
  std::vector<std::string> out;
  for (const auto& e : *a) {
    if (!e.is_string()) fail(key, "expected a string or a non-empty array of strings");
    out.push_back(e.as_string()->get());
  }
  return out;
}

std::map<int64_t, double> ConfigTable::get_int_keyed_floats(const std::string& key) {
  const toml::node* n = lookup(key);
  std::map<int64_t, double> out;
  if (!n) return out;
  const toml::table* t = n->as_table();
  if (!t) fail(key, "expected a table such as { 256 = 0.1, 1024 = 0.4 }");
  for (const auto& [k, v] : *t) {
    const std::string ks(k.str());
    char* end = nullptr;
    const long long batch = std::strtoll(ks.c_str(), &end, 10);
    if (ks.empty() || *end || batch <= 0 || !(v.is_floating_point() || v.is_integer()))
      fail(key, fmt::format("entry '{}': expected <global batch> = <learning rate>", ks));
    const double rate = v.is_integer() ? static_cast<double>(v.as_integer()->get()) : v.as_floating_point()->get();
    if (!std::isfinite(rate)) fail(key, fmt::format("entry '{}': expected a finite learning rate, not {}", ks, rate));
    out[batch] = rate;
  }
  return out;
}

ConfigTable ConfigTable::sub(const std::string& key) {
  const toml::node* n = lookup(key);
  if (n && !n->is_table()) fail(key, "expected a table");
  return ConfigTable(n ? *n->as_table() : empty_table(), file_, prefix_ + key + ".");
}

namespace {

// Names Keras, PyTorch, nanoGPT and llm.c users type, and what distrain calls the setting:
// a full key, or (starting with a space) a sentence where no key corresponds.
const std::map<std::string, std::string>& other_tools_names() {
  static const std::map<std::string, std::string> names{
      {"lr", "optimizer.learning_rate"},
      {"learning_rate", "optimizer.learning_rate"},
      {"batch_size", "strategy.per_replica_batch"},
      {"batch", "strategy.per_replica_batch"},
      {"micro_batch_size", "strategy.per_replica_batch"},
      {"num_epochs", "train.epochs"},
      {"n_epochs", "train.epochs"},
      {"epochs", "train.epochs"},
      {"max_iters", "train.steps"},
      {"max_steps", "train.steps"},
      {"num_steps", "train.steps"},
      {"total_steps", "train.steps"},
      {"num_iterations", "train.steps"},
      {"block_size", "data.seq_len"},
      {"seq_length", "data.seq_len"},
      {"sequence_length", "data.seq_len"},
      {"context_length", "data.seq_len"},
      {"max_seq_len", "data.seq_len"},
      {"n_ctx", "data.seq_len"},
      {"mixed_precision", "train.precision (\"bf16\" or \"float32\")"},
      {"amp", "train.precision (\"bf16\" or \"float32\")"},
      {"dtype", "train.precision (\"bf16\" or \"float32\")"},
      {"grad_clip", "optimizer.clip_norm"},
      {"clip_grad_norm", "optimizer.clip_norm"},
      {"max_grad_norm", "optimizer.clip_norm"},
      {"gradient_clip_val", "optimizer.clip_norm"},
      {"clipnorm", "optimizer.clip_norm"},
      {"gradient_accumulation_steps", "train.accumulate_steps"},
      {"accumulate_grad_batches", "train.accumulate_steps"},
      {"weight_decay", "optimizer.weight_decay"},
      {"wd", "optimizer.weight_decay"},
      {"warmup_iters", "optimizer.schedule.warmup_steps"},
      {"warmup_steps", "optimizer.schedule.warmup_steps"},
      {"lr_decay_iters", "optimizer.schedule.decay_steps"},
      {"decay_lr", "optimizer.schedule.decay (\"cosine\", \"step\", \"exponential\" or \"none\")"},
      {"beta1", "optimizer.beta_1"},
      {"beta2", "optimizer.beta_2"},
      {"out_dir", "checkpoint.dir"},
      {"output_dir", "checkpoint.dir"},
      {"checkpoint_dir", "checkpoint.dir"},
      {"save_dir", "checkpoint.dir"},
      {"eval_batch_size", "train.eval_batch"},
      {"val_batch_size", "train.eval_batch"},
      {"device", "strategy.devices"},
      {"eval_interval", " validation runs at the end of every epoch (train.validate); checkpoint.every_steps saves between"},
      {"val_check_interval", " validation runs at the end of every epoch (train.validate); checkpoint.every_steps saves between"},
      {"eval_iters", " validation covers the whole validation data, train.eval_batch examples at a time"},
      {"n_layer", " the layer count is the repeat block's count ([[model.layers]] type = \"repeat\", count)"},
      {"n_head", " heads are the attention layer's heads ([[model.layers]] type = \"attention\")"},
      {"n_embd", " the width is the embedding's output_dim ([[model.layers]] type = \"embedding\")"},
  };
  return names;
}

// Within one table: a key's names elsewhere in Keras (an [optimizer]'s "optimizer", a
// layer's "kernel") and typos, among the keys this table takes; "" when none is close.
std::string closest_key(const std::string& key, const std::set<std::string>& known) {
  static const std::map<std::string, std::string> kSameTable{
      {"optimizer", "type"}, {"units_out", "units"}, {"kernel", "kernel_size"}};
  if (const auto it = kSameTable.find(key); it != kSameTable.end() && known.count(it->second)) return it->second;
  std::string best;
  size_t best_distance = std::max<size_t>(2, key.size() / 3) + 1;
  for (const std::string& k : known)
    if (const size_t d = edit_distance(key, k); d < best_distance) best = k, best_distance = d;
  return best;
}

// "unknown key" and what the user most likely meant: another tool's name for a setting,
// else a key of this table.
std::string unknown_key_message(const std::string& key, const std::string& prefix, const std::set<std::string>& known) {
  if (const auto it = other_tools_names().find(key); it != other_tools_names().end())
    return it->second.front() == ' ' ? fmt::format("unknown key;{}", it->second)
                                     : fmt::format("unknown key; did you mean {}?", it->second);
  const std::string meant = closest_key(key, known);
  return meant.empty() ? "unknown key" : fmt::format("unknown key; did you mean {}{}?", prefix, meant);
}

}  // namespace

void ConfigTable::finish() const {
  for (const auto& [k, v] : table_) {
    const std::string key(k.str());
    if (used_.count(key)) continue;
    fail(key, unknown_key_message(key, prefix_, used_));
  }
}

}  // namespace distrain
