#include "core/train/preflight.hpp"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>

#include "core/backend/backend.hpp"
#include "core/base/host_memory.hpp"
#include "core/base/json.hpp"
#include "core/model/model.hpp"
#include "core/model/no_storage.hpp"
#include "core/io/strategy_kind.hpp"

namespace distrain {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Saturating: a size too large to count is too large to hold, and saturation keeps it so.
int64_t add(int64_t a, int64_t b) { return a > kMax - b ? kMax : a + b; }
int64_t mul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kMax : r;
}

int64_t fixed_bytes(const MemoryUse& m) { return add(add(m.parameters, m.gradients), m.optimizer); }

// Host memory is what CPU replicas use; a GPU replica's buffers live on its card, whose
// free memory the CUDA backend reports when it allocates.
int64_t cpu_replicas(const Recipe& recipe) {
  int64_t n = 0;
  for (const std::string& d : recipe.strategy.devices) n += Device::parse(d, recipe.file).is_cpu() ? 1 : 0;
  return n;
}

std::string bytes_or_more(int64_t bytes) { return bytes == kMax ? std::string("more than 8 EiB") : format_bytes(bytes); }

// "2 CPU replica(s) x parameters ...; 2 x ... offloaded": what the host holds of each
// replica (all of a CPU replica's, a GPU replica's offloaded state), and how many.
std::string replicas_holding(const Recipe& recipe, const MemoryUse& m) {
  const std::string offloaded =
      m.offloaded ? fmt::format("; {} x {} offloaded", recipe.strategy.devices.size(), format_bytes(m.offloaded)) : "";
  return fmt::format("{} CPU replica(s) x parameters {}, gradients {}, optimizer {}, activations {}{}", cpu_replicas(recipe),
                     format_bytes(m.parameters), format_bytes(m.gradients), format_bytes(m.optimizer),
                     bytes_or_more(m.activations), offloaded);
}

[[noreturn]] void too_large(const Recipe& recipe, const std::string& key, int64_t batch, const MemoryUse& m, int64_t total,
                            int64_t available) {
  throw UserError(fmt::format("{}: {} = {} needs {} of memory ({}) but {} are available; lower {}", recipe.file, key, batch,
                              bytes_or_more(total), replicas_holding(recipe, m), format_bytes(available), key));
}

int64_t available_or_unlimited() { return available_host_memory().value_or(kMax - 1); }

// A language model's sizes that its data's vocabulary outgrows, as "key = value": every
// embedding reading the token ids (its rows) and the last layer (its units).
std::vector<std::string> vocabulary_too_small(const Recipe& recipe, int64_t outputs, int64_t vocabulary) {
  std::vector<std::string> keys;
  for (const LayerSpec& layer : recipe.model().layers) {
    if (layer.prototype->type() != "embedding" || layer.inputs != std::vector<int>{-1}) continue;
    const auto rows = layer.prototype->settings().at("input_dim").get<int64_t>();
    if (rows < vocabulary) keys.push_back(fmt::format("{}.input_dim = {}", layer.key, rows));
  }
  if (outputs < vocabulary) keys.push_back(fmt::format("{}.units = {}", recipe.model().layers.back().key, outputs));
  return keys;
}

}  // namespace

void check_data_fits(const Recipe& recipe, const Dataset& train) {
  const Model model(recipe.model(), backend_for(Device{}),
                    storage_free_seams());
  DT_USER_CHECK(model.input_shape() == train.example_shape,
                "{}: model.input_shape {} does not match the data's examples {} ({})", recipe.file,
                model.input_shape().str(), train.example_shape.str(), train.source);
  const Shape& out = model.output_shape();
  const int64_t classes = out[out.rank() - 1];  // (classes,) or a language model's (sequence, vocabulary)
  if (train.token_data()) {
    const std::vector<std::string> small = vocabulary_too_small(recipe, classes, train.num_classes);
    DT_USER_CHECK(small.empty(), "{}: {} but the data has {} tokens in its vocabulary ({}); write \"vocabulary\" for {}",
                  recipe.file, fmt::join(small, " and "), train.num_classes, train.source, small.size() > 1 ? "both" : "it");
    return;
  }
  DT_USER_CHECK(classes >= train.num_classes,
                "{}: the model outputs {} values but the data has {} classes; make the last layer's units {}", recipe.file,
                classes, train.num_classes, train.num_classes);
}

void check_last_batch(const Recipe& recipe, const Dataset& train) {
  const int64_t replicas = planned_replicas(recipe);
  if (!recipe.strategy.sync_batch_norm || recipe.data.drop_remainder || replicas <= 0) return;  // <= 0: make_strategy says why
  const int64_t remainder = train.size() % (recipe.step_batch() * replicas);
  DT_USER_CHECK(remainder == 0 || remainder >= replicas,
                "{}: the last batch of each epoch has {} examples for {} replicas, and sync_batch_norm needs at least one "
                "on each; set data.drop_remainder = true",
                recipe.file, remainder, replicas);
}

int64_t host_bytes_of_replicas(const Recipe& recipe, const MemoryUse& m) {
  const auto devices = static_cast<int64_t>(recipe.strategy.devices.size());
  return add(mul(add(fixed_bytes(m), m.activations), cpu_replicas(recipe)), mul(m.offloaded, devices));
}

std::optional<MemoryUse> replicas_over_host(const Recipe& recipe) {
  const std::optional<MemoryUse> m = recipe.strategy.kind().memory_before_build(recipe);
  if (!m || host_bytes_of_replicas(recipe, *m) <= available_or_unlimited()) return std::nullopt;
  return m;
}

void check_replicas_fit_host(const Recipe& recipe) {
  const std::optional<MemoryUse> over = replicas_over_host(recipe);
  if (!over) return;
  const MemoryUse& m = *over;
  const int64_t available = available_or_unlimited();
  Recipe alone = recipe;  // one replica per process, as under mpirun
  alone.strategy.devices.resize(1);
  const int64_t one = host_bytes_of_replicas(alone, m);
  const std::string advice = one <= available ? "run one process per device under mpirun (strategy.devices one each)"
                                              : fmt::format("one replica alone needs {}: shard over more replicas, or lower "
                                                            "strategy.per_replica_batch or the model's size", bytes_or_more(one));
  throw UserError(fmt::format("{}: this process's {} replicas need {} of host memory ({}) but {} are available; {}",
                              recipe.file, recipe.strategy.name, bytes_or_more(host_bytes_of_replicas(recipe, m)), replicas_holding(recipe, m),
                              format_bytes(available), advice));
}

void check_memory_fits(const Recipe& recipe, Strategy& strategy, std::optional<int64_t> available) {
  const int64_t batch = recipe.strategy.per_replica_batch;  // a micro-batch's activations at once
  DT_USER_CHECK(mul(recipe.step_batch(), strategy.num_replicas()) < kMax,
                "{}: strategy.per_replica_batch = {} x {} replicas overflows a 64-bit global batch; lower it", recipe.file,
                recipe.step_batch(), strategy.num_replicas());
  const MemoryUse train = strategy.memory_per_replica(batch);
  const int64_t train_total = host_bytes_of_replicas(recipe, train);
  const int64_t limit = available.value_or(kMax - 1);
  if (train.activations == kMax || train_total > limit)
    too_large(recipe, "strategy.per_replica_batch", batch, train, train_total, limit);
  if (!recipe.train.validate) return;
  // Evaluation runs on the first replica, whose activations grow to eval_batch meanwhile.
  const MemoryUse eval = strategy.memory_per_replica(recipe.train.eval_batch);
  const int64_t eval_total = add(train_total, cpu_replicas(recipe) > 0 ? eval.activations : 0);
  if (eval.activations == kMax || eval_total > limit)
    too_large(recipe, "train.eval_batch", recipe.train.eval_batch, eval, eval_total, limit);
}

void check_planned_steps(const Recipe& recipe, int64_t batches_per_epoch) {
  DT_USER_CHECK(mul(recipe.train.epochs, batches_per_epoch) < kMax,
                "{}: train.epochs = {} x {} batches per epoch overflows a 64-bit step count; lower train.epochs",
                recipe.file, recipe.train.epochs, batches_per_epoch);
}

void prepare_run_folder(const std::string& run_dir, bool writer) {
  std::error_code ec;
  DT_USER_CHECK(!fs::exists(run_dir, ec) || fs::is_directory(run_dir, ec),
                "run folder {}: is a file, not a folder; choose another with --run-dir or checkpoint.dir", run_dir);
  fs::create_directories(run_dir, ec);
  if (!ec && !fs::is_directory(run_dir, ec)) ec = std::make_error_code(std::errc::not_a_directory);
  DT_USER_CHECK(!ec, "run folder {}: cannot create it ({}); choose another with --run-dir or checkpoint.dir", run_dir,
                ec.message());
  if (!writer) return;
  const std::string probe = (fs::path(run_dir) / ".distrain-write-probe").string();
  int err = 0;
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    err = errno;
  } else {
    if (::write(fd, "x", 1) != 1) err = errno ? errno : ENOSPC;  // a full disk still lets a file be created
    ::close(fd);
    ::unlink(probe.c_str());
  }
  DT_USER_CHECK(err == 0, "run folder {}: cannot write in it ({}); make it writable, free space or choose another with "
                "--run-dir or checkpoint.dir", run_dir, std::strerror(err));
}

}  // namespace distrain
