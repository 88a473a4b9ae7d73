#include "core/io/recipe.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/backend/gpu_info.hpp"
#include "core/base/host_memory.hpp"
#include "core/base/config_table.hpp"
#include "core/base/error.hpp"
#include "core/io/strategy_kind.hpp"
#include "core/io/toml_depth.hpp"
#include "datasets/token_data.hpp"

namespace distrain {

namespace {

constexpr int64_t kMaxBatch = int64_t{1} << 30;

void parse_hdf5_data(ConfigTable& c, DataSpec& d) {
  if (d.path.empty()) c.fail("path", "required with dataset = \"hdf5\": the .h5 file to read (docs/hdf5_data.md)");
  d.train_images = c.get_string("train_images", d.train_images);
  d.train_labels = c.get_string("train_labels", d.train_labels);
  d.test_images = c.get_string("test_images", d.test_images);
  d.test_labels = c.get_string("test_labels", d.test_labels);
  d.num_classes = c.get_int("num_classes", 0);
  if (d.num_classes != 0 && d.num_classes < 2) c.fail("num_classes", "must be at least 2 (0: the largest label + 1)");
}

// text and tokens: token data for a language model (datasets/token_data.hpp).
void parse_token_data(ConfigTable& c, DataSpec& d) {
  d.seq_len = c.get_int("seq_len");
  if (d.seq_len < 1 || d.seq_len > kMaxBatch) c.fail("seq_len", fmt::format("must be in [1, {}], got {}", kMaxBatch, d.seq_len));
  if (d.dataset == "text") {
    if (d.path.empty()) c.fail("path", "required with dataset = \"text\": the text file to train on");
    d.vocabulary = c.get_choice("vocabulary", "characters", {"bytes", "characters"});
    d.tokenizer = c.get_string("tokenizer", "");
    if (!d.tokenizer.empty() && c.has("vocabulary"))
      c.fail("vocabulary", "and data.tokenizer both say how the text becomes tokens; give one");
    d.validation_fraction = c.get_float("validation_fraction", 0.1);
    if (!(d.validation_fraction >= 0 && d.validation_fraction <= 0.5))
      c.fail("validation_fraction", fmt::format("must be in [0, 0.5], got {}", d.validation_fraction));
    return;
  }
  if (d.path.empty() && !(c.has("train_file") && c.has("val_file")))
    c.fail("path", "required with dataset = \"tokens\": the folder of train.bin and val.bin (or name both train_file and val_file)");
  d.tokenizer = c.get_string("tokenizer", "");
  d.vocab_size_given = c.has("vocab_size");
  d.vocab_size = c.get_int("vocab_size", 50257);
  if (d.vocab_size < 2 || d.vocab_size > 65536)
    c.fail("vocab_size", fmt::format("must be in [2, 65536] (token files hold uint16 ids), got {}", d.vocab_size));
  d.train_file = c.get_string("train_file", d.train_file);
  d.val_file = c.get_string("val_file", d.val_file);
  if (d.train_file.empty()) c.fail("train_file", "must not be empty");
  if (d.val_file.empty()) c.fail("val_file", "must not be empty");
  d.token_format = c.get_choice("token_format", "auto", {"auto", "raw", "llmc"});
}

// An image folder's keys: image_shape may wait for the model's input_shape (fill_image_shape).
void parse_image_folder(ConfigTable& c, DataSpec& d) {
  if (d.path.empty()) c.fail("path", "image_folder needs the folder of class folders (one sub-folder per class)");
  d.test_path = c.get_string("test_path", "");
  if (!d.test_path.empty() && d.validation_split > 0)
    c.fail("validation_split", "and data.test_path both choose what validates; give one");
  d.image_shape = Shape{};
  if (c.has("image_shape")) {
    d.image_shape = Shape(c.get_int_list("image_shape"));
    const auto& dims = d.image_shape.dims();
    if (dims.size() != 3 || std::any_of(dims.begin(), dims.end(), [](int64_t v) { return v <= 0; }) || (dims[2] != 1 && dims[2] != 3))
      c.fail("image_shape", "expected [height, width, channels] with 1 (grey) or 3 (RGB) channels");
  }
}

// keep_best and early stopping judge validations: there must be some, and restoring the best
// weights reads keep_best's file, of the same figure.
void check_validation_keys(const Recipe& r) {
  DT_USER_CHECK(r.checkpoint.keep_best.empty() || r.train.validate, "{}: checkpoint.keep_best needs train.validate = true",
                r.file);
  const EarlyStoppingSpec& e = r.train.early_stopping;
  DT_USER_CHECK(!e.restore_best || r.checkpoint.keep_best == e.monitor,
                "{}: train.early_stopping.restore_best reads the best weights from checkpoint.keep_best; set "
                "checkpoint.keep_best = \"{}\"", r.file, e.monitor);
}

// An image folder without data.image_shape takes the model's input_shape; and without a
// test folder or a validation share it has nothing to validate on.
void check_image_folder(Recipe& r) {
  DataSpec& d = r.data;
  if (d.dataset != "image_folder") return;
  if (d.image_shape.rank() == 0) {
    const Shape& in = r.model().input_shape;
    DT_USER_CHECK(in.rank() == 3 && (in[2] == 1 || in[2] == 3),
                  "{}: data.image_shape: the model's input_shape {} is not [height, width, 1 or 3]; set data.image_shape", r.file,
                  in.str());
    d.image_shape = in;
  }
  DT_USER_CHECK(!r.train.validate || !d.test_path.empty() || d.validation_split > 0,
                "{}: an image_folder with nothing to validate on: set data.test_path (a folder of the same class folders) or "
                "data.validation_split (a share of data.path's files), or train.validate = false", r.file);
}

void parse_data(ConfigTable c, DataSpec& d) {
  d.dataset = c.get_choice("dataset", "fashion_mnist", {"fashion_mnist", "mnist", "synthetic", "hdf5", "image_folder", "text", "tokens"});
  d.path = c.get_string("path", "");
  if (d.dataset == "hdf5") parse_hdf5_data(c, d);
  if (!d.token_data()) {  // token data holds out its own share (validation_fraction)
    d.validation_split = c.get_float("validation_split", 0.0);
    if (!(d.validation_split >= 0 && d.validation_split < 1)) c.fail("validation_split", "must be in [0, 1)");
  }
  if (d.dataset == "image_folder") parse_image_folder(c, d);
  if (d.token_data()) parse_token_data(c, d);
  d.shuffle = c.get_bool("shuffle", true);
  d.drop_remainder = c.get_bool("drop_remainder", false);
  d.placement = c.get_choice("placement", "auto", {"auto", "device", "host"});
  if (d.token_data() && d.placement == "device")
    c.fail("placement", "\"device\" is not available for token data (text, tokens), whose batches are cut on the host; use "
                        "\"auto\" or \"host\"");
  if (d.dataset == "synthetic") {
    d.train_examples = c.get_int("train_examples", d.train_examples);
    d.test_examples = c.get_int("test_examples", d.test_examples);
    d.num_classes = c.get_int("num_classes", d.num_classes);
    d.image_shape = Shape(c.get_int_list("image_shape", d.image_shape.dims()));
    if (d.train_examples <= 0) c.fail("train_examples", "must be positive");
    if (d.test_examples <= 0) c.fail("test_examples", "must be positive");
    if (d.num_classes < 2) c.fail("num_classes", "must be at least 2");
    const auto& dims = d.image_shape.dims();
    if (dims.size() != 3 || std::any_of(dims.begin(), dims.end(), [](int64_t v) { return v <= 0; }))
      c.fail("image_shape", "expected [height, width, channels] of positive integers");
  }
  c.finish();
}

void parse_optimizer(ConfigTable c, OptimizerSpec& o, ScheduleSpec& s, const StrategySpec& strategy) {
  const std::string type = c.get_choice("type", "adam", {"sgd", "adam", "adamw"});
  o = default_optimizer_spec(type);
  o.learning_rate = c.get_float("learning_rate", o.learning_rate);
  if (!(o.learning_rate > 0)) c.fail("learning_rate", "must be positive");
  o.weight_decay = c.get_float("weight_decay", o.weight_decay);
  if (o.weight_decay < 0) c.fail("weight_decay", "must be >= 0");
  o.clip_norm = c.get_float("clip_norm", 0.0);
  if (!(o.clip_norm >= 0) || !std::isfinite(o.clip_norm)) c.fail("clip_norm", "must be >= 0 (0: no clipping)");
  strategy.kind().check_optimizer(c, o, strategy);
  if (type == "sgd") {
    o.momentum = c.get_float("momentum", 0.0);
    o.nesterov = c.get_bool("nesterov", false);
    if (o.momentum < 0 || o.momentum >= 1) c.fail("momentum", "must be in [0, 1)");
  } else {
    o.beta_1 = c.get_float("beta_1", o.beta_1);
    o.beta_2 = c.get_float("beta_2", o.beta_2);
    o.epsilon = c.get_float("epsilon", o.epsilon);
    if (o.beta_1 < 0 || o.beta_1 >= 1) c.fail("beta_1", "must be in [0, 1)");
    if (o.beta_2 < 0 || o.beta_2 >= 1) c.fail("beta_2", "must be in [0, 1)");
    if (!(o.epsilon > 0)) c.fail("epsilon", "must be positive");
  }
  ConfigTable sc = c.sub("schedule");
  s.base_batch = sc.get_int("base_batch", strategy.per_replica_batch);
  if (s.base_batch <= 0) sc.fail("base_batch", "must be positive");
  s.scaling = sc.get_choice("scaling", "linear", {"linear", "sqrt", "none"});
  s.warmup_steps = sc.get_int("warmup_steps", 0);
  if (s.warmup_steps < 0) sc.fail("warmup_steps", "must be >= 0");
  s.decay = sc.get_choice("decay", "none", {"none", "cosine", "step", "exponential"});
  s.decay_steps = sc.get_int("decay_steps", 0);
  if (s.decay_steps < 0) sc.fail("decay_steps", "must be >= 0");
  if ((s.decay == "step" || s.decay == "exponential") && s.decay_steps == 0)
    sc.fail("decay_steps", "must be positive with decay = \"" + s.decay + "\"");
  s.decay_rate = sc.get_float("decay_rate", s.decay_rate);
  if (!(s.decay_rate > 0)) sc.fail("decay_rate", "must be positive");
  s.alpha = sc.get_float("alpha", 0.0);
  if (s.alpha < 0 || s.alpha > 1) sc.fail("alpha", "must be in [0, 1]");
  s.table = sc.get_int_keyed_floats("table");
  sc.finish();
  c.finish();
}

// A device that does not exist is refused before any work. CPU devices are logical: each
// is a replica thread with its share of the cores, numbered from 0 (cpu:0 .. cpu:N-1 for N
// of them). A GPU index is checked against the GPUs the CUDA plugin sees; without a usable
// plugin, making the backend reports why, also before any work.
void check_device_indices(const ConfigTable& c, const std::vector<std::string>& devices) {
  int64_t cpus = 0;
  for (const auto& d : devices) cpus += Device::parse(d, c.file()).is_cpu() ? 1 : 0;
  std::optional<GpuInfo> gpus;
  for (const auto& d : devices) {
    const Device dev = Device::parse(d, c.file());
    if (dev.is_cpu() && dev.index >= cpus)
      c.fail("devices", fmt::format("{}: cpu devices are logical replicas numbered from 0; with {} of them use cpu:0 .. "
                                    "cpu:{}", dev.str(), cpus, cpus - 1));
    if (!dev.is_cuda()) continue;
    if (!gpus) gpus = gpu_info();
    if (gpus->built && gpus->problem.empty() && static_cast<size_t>(dev.index) >= gpus->devices.size())
      c.fail("devices", fmt::format("{}: this machine has {} GPU(s){}", dev.str(), gpus->devices.size(),
                                    gpus->devices.empty() ? "" : fmt::format(" (cuda:0 .. cuda:{})", gpus->devices.size() - 1)));
  }
}

// strategy.devices: "auto" resolved, each parsed and listed once (several replicas of one
// process may share a GPU only where the strategy allows it), indices checked.
std::vector<Device> parse_devices(ConfigTable& c, StrategySpec& s) {
  const StrategyKind& kind = s.kind();
  s.devices = c.get_string_list("devices", {"auto"});
  if (s.devices == std::vector<std::string>{"auto"}) {
    // All GPUs when the build and machine have them; else one CPU device.
    const GpuInfo gpus = gpu_info();
    s.devices.clear();
    for (size_t i = 0; i < gpus.devices.size() && !kind.single_device(); ++i) s.devices.push_back(fmt::format("cuda:{}", i));
    if (s.devices.empty()) s.devices.push_back(gpus.devices.empty() ? "cpu:0" : "cuda:0");
  }
  std::set<std::string> seen;
  std::vector<Device> devices;
  for (const auto& d : s.devices) {
    const Device dev = devices.emplace_back(Device::parse(d, c.file() + ": strategy.devices"));
    if (seen.insert(dev.str()).second) continue;
    // Several replicas on one GPU (logical devices) exercise multi-GPU logic on one card.
    if (dev.is_cpu() || !kind.replicas_may_share_a_gpu())
      c.fail("devices", fmt::format("{} is listed twice; one replica per device{}", dev.str(),
                                    dev.is_cuda() ? fmt::format(" (only {} share a GPU between replicas)",
                                                                strategy_names_where([](const StrategyKind& k) {
                                                                  return k.replicas_may_share_a_gpu();
                                                                }))
                                                  : ""));
  }
  check_device_indices(c, s.devices);
  if (kind.single_device() && s.devices.size() != 1)
    c.fail("devices", fmt::format("{} takes exactly one device, got {}; set strategy.devices = [\"{}\"]", s.name,
                                  s.devices.size(), s.devices.front()));
  return devices;
}

// The kinds that read `key` as their own, in order ("" when it is a common key).
std::string readers_of(const std::string& key) {
  std::vector<std::string> readers;
  for (const StrategyKind* k : strategy_kinds()) {
    const std::vector<std::string> own = k->own_keys();
    if (std::find(own.begin(), own.end(), key) != own.end()) readers.push_back(k->name());
  }
  return fmt::format("{}", fmt::join(readers, ", "));
}

// The table without the [strategy] keys its strategy does not read, and the notice that
// names them ("" when there are none). An unknown strategy name keeps every key: parsing
// then refuses the name itself.

std::shared_ptr<const toml::table> without_other_strategies_keys(std::shared_ptr<const toml::table> table,
                                                                 const std::string& file, std::vector<std::string>& notices) {
  const toml::table* strategy = (*table)["strategy"].as_table();
  if (!strategy) return table;
  const StrategyKind* kind = find_strategy_kind((*strategy)["name"].value_or(std::string("one_device")));
  if (!kind) return table;
  const std::vector<std::string> own = kind->own_keys();
  std::vector<std::string> dropped, dropped_keys;
  for (const auto& [key, value] : *strategy) {
    const std::string name(key.str());
    const std::string readers = readers_of(name);
    if (readers.empty() || std::find(own.begin(), own.end(), name) != own.end()) continue;
    dropped.push_back(fmt::format("strategy.{} ({} only)", name, readers));
    dropped_keys.push_back(name);
  }
  if (dropped.empty()) return table;
  auto copy = std::make_shared<toml::table>(*table);
  toml::table& kept = *(*copy)["strategy"].as_table();
  for (const std::string& key : dropped_keys) kept.erase(key);
  notices.push_back(fmt::format("{}: strategy \"{}\" does not read {}: ignored", file, kind->name(), fmt::join(dropped, ", ")));
  return copy;
}

// A byte count ("2GiB", "512MiB") or an integer of bytes; 0 or absent: no budget.
void parse_device_memory(ConfigTable& c, StrategySpec& s) {
  const toml::node* node = c.raw("device_memory");
  if (!node) return;
  std::optional<int64_t> bytes;
  if (const auto* i = node->as_integer()) bytes = i->get() >= 0 ? std::optional<int64_t>(i->get()) : std::nullopt;
  if (const auto* t = node->as_string()) bytes = parse_byte_count(t->get());
  if (!bytes) c.fail("device_memory", "expected a size such as \"2GiB\", \"512MiB\" or \"16GB\" (or 0 for no budget)");
  s.device_memory = *bytes;
}

void parse_strategy(ConfigTable c, StrategySpec& s) {
  s.name = c.get_choice("name", "one_device", strategy_names());
  const std::vector<Device> devices = parse_devices(c, s);
  s.check_every = c.get_int("check_every", 100);
  if (s.check_every < 0) c.fail("check_every", "must be >= 0 (0 = never)");
  s.sync_batch_norm = c.get_bool("sync_batch_norm", false);
  s.timeout_seconds = c.get_float("timeout_seconds", 300.0);
  // Deadlines are int64 nanoseconds from now: a year is far inside them, and far beyond any collective.
  if (!(s.timeout_seconds >= 0 && s.timeout_seconds <= StrategySpec::kMaxTimeoutSeconds))
    c.fail("timeout_seconds", fmt::format("must be between 0 (wait forever) and {:.0f} (a year), got {}",
                                          StrategySpec::kMaxTimeoutSeconds, s.timeout_seconds));
  s.per_replica_batch = c.get_int("per_replica_batch", 64);
  // Bounded so that a global batch (times replicas) and batch arithmetic stay inside int64.
  if (s.per_replica_batch <= 0) c.fail("per_replica_batch", fmt::format("must be positive, got {}", s.per_replica_batch));
  if (s.per_replica_batch > kMaxBatch)
    c.fail("per_replica_batch", fmt::format("must be at most {}, got {}", kMaxBatch, s.per_replica_batch));
  const int64_t threads = c.get_int("threads", 0);
  if (threads < 0 || threads > 4096) c.fail("threads", "must be in [0, 4096] (0 = all cores)");
  s.threads = static_cast<int>(threads);
  parse_device_memory(c, s);
  s.kind().parse(c, s, devices);
  c.finish();
}

const std::vector<std::string> kMonitored{"val_loss", "val_accuracy"};

// [train.early_stopping]: Keras's EarlyStopping (monitor, patience, min_delta, restore_best).
void parse_early_stopping(ConfigTable& train, TrainSpec& t) {
  if (!train.has("early_stopping")) return;
  ConfigTable c = train.sub("early_stopping");
  EarlyStoppingSpec& e = t.early_stopping;
  e.enabled = true;
  e.monitor = c.get_choice("monitor", "val_loss", kMonitored);
  e.patience = c.get_int("patience");
  if (e.patience < 1) c.fail("patience", "must be at least 1 (validations without improvement before stopping)");
  e.min_delta = c.get_float("min_delta", 0.0);
  if (!(e.min_delta >= 0) || !std::isfinite(e.min_delta)) c.fail("min_delta", "must be >= 0");
  e.restore_best = c.get_bool("restore_best", false);
  if (!t.validate) c.fail("monitor", "needs validation: train.validate = true");
  c.finish();
}

void parse_train(ConfigTable c, TrainSpec& t, const StrategyKind& strategy) {
  t.epochs = c.get_int("epochs", 1);
  if (t.epochs <= 0) c.fail("epochs", fmt::format("must be positive, got {}", t.epochs));
  t.steps = c.get_int("steps", 0);
  if (t.steps < 0) c.fail("steps", "must be >= 0 (0 = no cap)");
  t.validate = c.get_bool("validate", true);
  t.validate_every_steps = c.get_int("validate_every_steps", 0);
  if (t.validate_every_steps < 0) c.fail("validate_every_steps", "must be >= 0 (0: at the end of every epoch only)");
  if (t.validate_every_steps > 0 && !t.validate) c.fail("validate_every_steps", "needs train.validate = true");
  parse_early_stopping(c, t);
  t.eval_batch = c.get_int("eval_batch", 500);
  if (t.eval_batch <= 0) c.fail("eval_batch", "must be positive");
  if (t.eval_batch > kMaxBatch) c.fail("eval_batch", fmt::format("must be at most {}", kMaxBatch));
  t.allow_tf32 = c.get_bool("allow_tf32", false);
  t.tensorboard = c.get_bool("tensorboard", true);
  t.tensorboard_every_steps = c.get_int("tensorboard_every_steps", 100);
  if (t.tensorboard_every_steps < 0) c.fail("tensorboard_every_steps", "must be >= 0 (0 = epoch metrics only)");
  t.tensorboard_flush_seconds = c.get_float("tensorboard_flush_seconds", 10.0);
  if (!(t.tensorboard_flush_seconds >= 0 && t.tensorboard_flush_seconds <= 86400))
    c.fail("tensorboard_flush_seconds", fmt::format("must be in [0, 86400] (0: every step's loss at once), got {}",
                                                    t.tensorboard_flush_seconds));
  t.skip_nonfinite_steps = c.get_choice("on_nonfinite", "stop", {"stop", "skip_step"}) == "skip_step";
  t.recompute_blocks = c.get_choice("recompute", "none", {"none", "blocks"}) == "blocks";
  const std::string precision = c.get_choice("precision", "float32", {"float32", "bf16", "bfloat16"});  // bfloat16: PyTorch's name
  t.matmul_dtype = precision == "float32" ? DType::f32 : DType::bf16;
  t.accumulate_steps = c.get_int("accumulate_steps", 1);
  if (t.accumulate_steps < 1 || t.accumulate_steps > TrainSpec::kMaxAccumulateSteps)
    c.fail("accumulate_steps", fmt::format("must be in [1, {}]", TrainSpec::kMaxAccumulateSteps));
  strategy.check_train(c, t);
  c.finish();
}

void parse_checkpoint(ConfigTable c, CheckpointSpec& k, const std::string& name) {
  k.dir = c.get_string("dir", "runs/" + name);
  if (k.dir.empty()) c.fail("dir", "must not be empty");
  k.every_epochs = c.get_int("every_epochs", 1);
  k.every_steps = c.get_int("every_steps", 0);
  k.keep = c.get_int("keep", 3);
  k.keep_best = c.has("keep_best") ? c.get_choice("keep_best", "val_loss", kMonitored) : "";
  k.init_from = c.get_string("init_from", "");
  k.resume_from = c.get_string("resume_from", "");
  if (!k.resume_from.empty() && !k.init_from.empty())
    c.fail("resume_from", "and init_from both say where to start: keep one (init_from takes only the weights)");
  if (k.every_epochs < 0) c.fail("every_epochs", "must be >= 0 (0 = never)");
  if (k.every_steps < 0) c.fail("every_steps", "must be >= 0 (0 = never)");
  if (k.keep <= 0) c.fail("keep", "must be positive");
  c.finish();
}

toml::table parse_text(const std::string& text, const std::string& file) {
  check_toml_nesting(text, file);
  try {
    return toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    throw UserError(fmt::format("{}:{}: malformed TOML: {}", file, e.source().begin.line, e.description()));
  }
}

}  // namespace

std::string Recipe::resolved_text() const {
  std::ostringstream out;
  out << toml::toml_formatter(*table);
  return out.str();
}

namespace {

// The keys of [model] that may say "vocabulary": the token data's vocabulary size.
constexpr const char* kVocabularySized[] = {"input_dim", "units"};

// Calls `f(table, key)` for every such key of `node` and the tables inside it.
template <class Node, class F>
void for_vocabulary_keys(Node& node, F&& f) {
  if (auto* table = node.as_table()) {
    for (const char* key : kVocabularySized)
      if (const auto* v = table->get(key); v && v->value_or(std::string()) == "vocabulary") f(*table, key);
    for (auto&& [k, v] : *table) for_vocabulary_keys(v, f);
  } else if (auto* array = node.as_array()) {
    for (auto& v : *array) for_vocabulary_keys(v, f);
  }
}

// [model] with every `input_dim = "vocabulary"` and `units = "vocabulary"` replaced by the
// size of the token data's vocabulary, so the size is said once (and stored as a number).
std::shared_ptr<const toml::table> with_vocabulary_sizes(std::shared_ptr<const toml::table> table, const std::string& file) {
  const toml::node* model = table->get("model");
  bool uses = false;
  if (model) for_vocabulary_keys(*model, [&](const toml::table&, const char*) { uses = true; });
  if (!uses) return table;
  DataSpec data;
  parse_data(ConfigTable(*table, file, "").sub("data"), data);
  DT_USER_CHECK(data.token_data(), "{}: [model] sizes a layer by \"vocabulary\", the token data's vocabulary size, and "
                "data.dataset = \"{}\" has none; give the number", file, data.dataset);
  const int64_t size = token_vocabulary_size(data);
  auto copy = std::make_shared<toml::table>(*table);
  for_vocabulary_keys(*copy->get("model"), [&](toml::table& t, const char* key) { t.insert_or_assign(key, size); });
  return copy;
}

}  // namespace

Recipe recipe_from_table(std::shared_ptr<const toml::table> table, const std::string& file) {
  Recipe r;
  r.file = file;
  r.table = with_vocabulary_sizes(without_other_strategies_keys(std::move(table), file, r.notices), file);
  ConfigTable root(*r.table, file, "");
  r.name = root.get_string("name", std::filesystem::path(file).stem().string());
  if (r.name.empty()) root.fail("name", "must not be empty");
  const int64_t seed = root.get_int("seed", 0);
  if (seed < 0) root.fail("seed", "must be >= 0");
  r.seed = static_cast<uint64_t>(seed);
  parse_data(root.sub("data"), r.data);
  const toml::node* model = root.raw("model");
  if (!model || !model->is_table()) root.fail("model", "missing: add a [model] table with input_shape and [[model.layers]]");
  {
    ConfigTable loss = root.sub("loss");
    const std::string type =
        loss.get_choice("type", "sparse_categorical_crossentropy", {"sparse_categorical_crossentropy", "mean_squared_error"});
    r.loss.type = type == "mean_squared_error" ? LossType::mean_squared_error : LossType::sparse_categorical_crossentropy;
    r.loss.from_logits = loss.get_bool("from_logits", true);
    loss.finish();
  }
  parse_strategy(root.sub("strategy"), r.strategy);
  parse_optimizer(root.sub("optimizer"), r.optimizer, r.schedule, r.strategy);
  parse_train(root.sub("train"), r.train, r.strategy.kind());
  parse_checkpoint(root.sub("checkpoint"), r.checkpoint, r.name);
  r.model_spec = std::make_shared<const ModelSpec>(parse_model_spec(*model->as_table(), file));
  check_image_folder(r);
  check_validation_keys(r);
  DT_USER_CHECK(!r.train.recompute_blocks || r.model_spec->blocks > 0,
                "{}: train.recompute = \"blocks\" reruns each repeat block's forward in backward, and [model] has no repeat "
                "block; use \"none\"", file);
  root.finish();
  return r;
}

Recipe parse_recipe(const std::string& text, const std::string& file, const std::vector<std::string>& overrides) {
  toml::table table = parse_text(text, file);
  for (const auto& o : overrides) apply_override(table, o, file);
  return recipe_from_table(std::make_shared<const toml::table>(std::move(table)), file);
}

Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  DT_USER_CHECK(!std::filesystem::is_directory(path, ec), "{}: is a folder; give the recipe file (TOML) inside it", path);
  DT_USER_CHECK(std::filesystem::is_regular_file(path, ec), "{}: recipe not found", path);
  std::ifstream in(path);
  DT_USER_CHECK(in, "{}: cannot read", path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_recipe(text.str(), path, overrides);
}

std::string toml_quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
    else out += c;
  }
  return out + "\"";
}

namespace {

// A --set value as the table {v = value}, parsed with the --set as its source, which the
// node keeps (moved, not copied): an error about the key then names the --set, not the
// recipe file. A value that is not TOML is a plain string.
toml::table override_value(const std::string& value_text, const std::string& source) {
  for (const std::string& candidate : {value_text, toml_quoted(value_text)}) {
    try {
      return toml::parse("v = " + candidate, source);
    } catch (const toml::parse_error&) {
    }
  }
  toml::table plain;  // not even a TOML string (invalid UTF-8): as it is, without its source
  plain.insert("v", value_text);
  return plain;
}

}  // namespace

void apply_override(toml::table& table, const std::string& assignment, const std::string& file) {
  const auto eq = assignment.find('=');
  DT_USER_CHECK(eq != std::string::npos && eq > 0, "--set {}: expected KEY=VALUE", assignment);
  const std::string key = assignment.substr(0, eq);
  const std::string value_text = assignment.substr(eq + 1);
  check_toml_nesting("v = " + value_text, "--set " + key);
  toml::table parsed = override_value(value_text, "--set " + assignment);

  std::vector<std::string> parts;
  std::stringstream ks(key);
  for (std::string part; std::getline(ks, part, '.');) {
    DT_USER_CHECK(!part.empty(), "--set {}: empty component in key '{}'", assignment, key);
    DT_USER_CHECK(parts.size() < kMaxTomlNesting, "--set: key '{:.60}...' has more than {} parts", key, kMaxTomlNesting);
    parts.push_back(part);
  }
  toml::node* node = &table;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (toml::table* t = node->as_table()) {
      if (!t->contains(parts[i])) t->insert(parts[i], toml::table{});
      node = t->get(parts[i]);
    } else if (toml::array* a = node->as_array()) {
      char* end = nullptr;
      const long idx = std::strtol(parts[i].c_str(), &end, 10);
      DT_USER_CHECK(*end == 0 && idx >= 0 && static_cast<size_t>(idx) < a->size(), "--set {}: '{}' is not an index of {} ({})",
                    assignment, parts[i], fmt::join(parts.begin(), parts.begin() + static_cast<long>(i), "."),
                    a->empty() ? std::string("empty") : fmt::format("0..{}", a->size() - 1));
      node = a->get(static_cast<size_t>(idx));
    } else {
      throw UserError(fmt::format("--set {}: {} is not a table in {}", assignment,
                                  fmt::join(parts.begin(), parts.begin() + static_cast<long>(i), "."), file));
    }
  }
  toml::table* target = node->as_table();
  DT_USER_CHECK(target, "--set {}: {} is not a table in {}", assignment,
                fmt::join(parts.begin(), parts.end() - 1, "."), file);
  target->insert_or_assign(parts.back(), std::move(*parsed.get("v")));
}

}  // namespace distrain
