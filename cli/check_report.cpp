#include "cli/check_report.hpp"

#include <fmt/ranges.h>

#include <algorithm>

#include "core/base/host_memory.hpp"
#include "core/io/strategy_kind.hpp"
#include "core/optim/lr_schedule.hpp"
#include "core/plan/mesh_plan.hpp"
#include "core/train/preflight.hpp"
#include "core/train/step_loop.hpp"
#include "datasets/loader.hpp"

namespace distrain::cli {

namespace {

// What strategy.offload_optimizer puts in host memory.
const char* offloaded_what(const Recipe& recipe) {
  return recipe.strategy.kind().offloads_masters(recipe) ? "the optimizer state and the float32 master weights"
                                                          : "the optimizer state";
}

// " (ant, bee, ...)": the classes' names where the data names them, the first ten.
std::string class_list(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  const size_t shown = std::min<size_t>(names.size(), 10);
  return fmt::format(" ({}{})", fmt::join(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                     names.size() > shown ? ", ..." : "");
}

const char* loss_name(const Recipe& recipe) {
  return recipe.loss.type == LossType::mean_squared_error ? "mean_squared_error" : "sparse_categorical_crossentropy";
}

const char* precision_text(const Recipe& recipe) {
  return recipe.train.matmul_dtype == DType::bf16
             ? "bf16 operands in dense and attention matrix products, float32 accumulation; layer outputs kept in bf16 "
               "(float32 copies while read); layers read their weights rounded to bf16; master weights, gradients, "
               "optimizer state, losses and checkpoints float32"
             : "float32";
}

}  // namespace

void CheckReport::notices(const std::vector<std::string>& notices) {
  if (json_) {
    if (!notices.empty()) out_["notes"] = notices;
    return;
  }
  for (const std::string& notice : notices) fmt::print("note: {}\n", notice);
}

void CheckReport::launch(const std::vector<std::string>& lines) {
  if (json_) {
    if (!lines.empty()) out_["launch"] = lines;
    return;
  }
  for (const std::string& line : lines) fmt::print("{}\n", line);
}

namespace {

// Steps per epoch, planned over the epochs and run (train.steps caps them); per epoch and
// planned are 0 without the data, and the run is then train.steps' (0: unknown).
struct StepCounts {
  int64_t per_epoch = 0, planned = 0, total = 0;
};

StepCounts step_counts(const Recipe& recipe, const Splits* data, int replicas) {
  if (!data) return {0, 0, recipe.train.steps};
  StepCounts c;
  c.per_epoch = Loader(data->train, LoaderSpec{recipe.step_batch(), replicas, false, recipe.data.drop_remainder}).batches_per_epoch();
  check_planned_steps(recipe, c.per_epoch);
  c.planned = c.per_epoch * recipe.train.epochs;
  c.total = recipe_plan(recipe, c.per_epoch).total_steps;
  return c;
}

std::string data_line(const Recipe& recipe, const Splits* data) {
  if (!data)
    return fmt::format("{}: not read (--without-data); examples of {} as the model's input_shape says", recipe.data.dataset,
                       recipe.model().input_shape.str());
  return fmt::format("{}: {} train / {} test examples of {}, {} classes{}", recipe.data.dataset, data->train.size(),
                     data->test.size(), data->train.example_shape.str(), data->train.num_classes,
                     class_list(data->train.class_names));
}

std::string steps_line(const Recipe& recipe, const StepCounts& c, bool read) {
  if (!read)
    return c.total ? fmt::format("{} (train.steps); per epoch unknown without the data", c.total)
                   : "per epoch unknown without the data (no train.steps caps the run)";
  return fmt::format("{} per epoch x {} epochs = {}{}", c.per_epoch, recipe.train.epochs, c.planned,
                     c.total < c.planned ? fmt::format(", capped at {} by train.steps", c.total) : "");
}

}  // namespace

void CheckReport::run(const Recipe& recipe, const Splits* data, const std::string& strategy, int replicas,
                      const std::string& optimizer, int64_t update_batch) {
  const int64_t global = recipe.step_batch() * replicas;
  const StepCounts steps = step_counts(recipe, data, replicas);
  // Without a length the schedule's warm-up and decay cannot be placed: its base rate only.
  const std::optional<LrSchedule> schedule =
      steps.total ? std::optional<LrSchedule>(LrSchedule(recipe.optimizer.learning_rate, recipe.schedule, update_batch, steps.total))
                  : std::nullopt;
  const std::string rate = schedule ? schedule->describe()
                                    : fmt::format("{} before its schedule, whose length depends on the data",
                                                  recipe.optimizer.learning_rate);
  const std::string unfinished = schedule ? schedule->unfinished() : "";
  if (json_) {
    out_["recipe"] = {{"name", recipe.name}, {"file", recipe.file}};
    out_["data"] = data ? Json{{"dataset", recipe.data.dataset}, {"train_examples", data->train.size()},
                               {"test_examples", data->test.size()}, {"example_shape", data->train.example_shape.dims()},
                               {"classes", data->train.num_classes}, {"class_names", data->train.class_names}}
                        : Json{{"dataset", recipe.data.dataset}, {"read", false}};
    out_["strategy"] = {{"name", recipe.strategy.name}, {"description", strategy}, {"replicas", replicas},
                        {"per_replica_batch", recipe.strategy.per_replica_batch},
                        {"accumulate_steps", recipe.train.accumulate_steps}, {"global_batch", global}};
    out_["steps"] = data ? Json{{"per_epoch", steps.per_epoch}, {"epochs", recipe.train.epochs}, {"planned", steps.planned},
                                {"total", steps.total}}
                         : Json{{"per_epoch", nullptr}, {"epochs", recipe.train.epochs}, {"planned", nullptr},
                                {"total", steps.total ? Json(steps.total) : Json(nullptr)}};
    out_["optimizer"] = optimizer;
    out_["learning_rate"] = rate;
    if (!unfinished.empty()) out_["warnings"] = {unfinished};
    out_["loss"] = {{"type", loss_name(recipe)}, {"from_logits", recipe.loss.from_logits}};
    out_["precision"] = recipe.train.matmul_dtype == DType::bf16 ? "bf16" : "float32";
    out_["checkpoint"] = {{"dir", recipe.checkpoint.dir}, {"every_epochs", recipe.checkpoint.every_epochs},
                          {"every_steps", recipe.checkpoint.every_steps}, {"keep", recipe.checkpoint.keep}};
    return;
  }
  fmt::print("recipe      {} ({})\n", recipe.name, recipe.file);
  fmt::print("data        {}\n", data_line(recipe, data));
  const std::string micro = recipe.train.accumulate_steps > 1
                                ? fmt::format(" ({} micro-batches of {}, train.accumulate_steps)", recipe.train.accumulate_steps,
                                              recipe.strategy.per_replica_batch)
                                : "";
  fmt::print("strategy    {}; {} replica(s) x {} per replica{} = global batch {}\n", strategy, replicas, recipe.step_batch(),
             micro, global);
  fmt::print("steps       {}\n", steps_line(recipe, steps, data != nullptr));
  fmt::print("optimizer   {}\n", optimizer);
  fmt::print("learn rate  {}\n", rate);
  if (!unfinished.empty()) fmt::print("warning     {}\n", unfinished);
  fmt::print("loss        {}{}\n", loss_name(recipe), recipe.loss.from_logits ? " (from logits)" : "");
  fmt::print("precision   {}\n", precision_text(recipe));
  fmt::print("checkpoint  {} (every {} epoch(s), every {} step(s), keep {})\n", recipe.checkpoint.dir,
             recipe.checkpoint.every_epochs, recipe.checkpoint.every_steps, recipe.checkpoint.keep);
}

void CheckReport::memory(const Recipe& recipe, const MemoryUse& mem) {
  const std::string note = recipe.strategy.kind().memory_note(recipe);
  if (json_) {
    out_["memory_per_replica"] = {{"parameters", mem.parameters}, {"gradients", mem.gradients}, {"optimizer", mem.optimizer},
                                  {"activations", mem.activations}, {"offloaded", mem.offloaded},
                                  {"device_total", mem.device_total()}};
    if (mem.offloaded) out_["memory_per_replica"]["offloaded_what"] = offloaded_what(recipe);
    if (!note.empty()) out_["memory_note"] = note;
    return;
  }
  fmt::print("memory      per replica: parameters {}, gradients {}, optimizer {}, activations {}{}; device total {}\n",
             format_mib(mem.parameters), format_mib(mem.gradients), format_mib(mem.optimizer), format_mib(mem.activations),
             mem.offloaded ? fmt::format(" (in host memory: {}, {})", format_mib(mem.offloaded), offloaded_what(recipe)) : "",
             format_mib(mem.device_total()));
  if (!note.empty()) fmt::print("note        {}\n", note);
}

int64_t CheckReport::mesh_ranks(const Recipe& recipe) {
  if (!json_) return print_mesh_plan(stdout, recipe);
  int64_t largest = 0;
  Json ranks = Json::array();
  for (const RankBytes& b : mesh_rank_bytes(recipe)) {
    ranks.push_back({{"parameters", b.parameters}, {"gradients", b.gradients}, {"optimizer", b.optimizer},
                     {"activations", b.activations}, {"offloaded", b.offloaded}, {"device_total", b.total()}});
    largest = std::max(largest, b.total());
  }
  out_["memory_per_rank"] = ranks;
  return largest;
}

void CheckReport::unbuilt_host(size_t replicas, int64_t host_bytes) {
  if (json_) {
    out_["host"] = {{"replicas_in_this_process", replicas}, {"bytes_needed", host_bytes}, {"fits", false}};
    return;
  }
  fmt::print("host        this process's {} replica(s) would need {} of host memory, more than is available; train them "
             "under mpirun, one process per device (strategy.devices one each)\n",
             replicas, format_mib(host_bytes));
}

void CheckReport::model(const Model& model) {
  if (json_) {
    out_["model"] = {{"layers", model.layers().size()}, {"trainable_parameters", model.params().trainable_elements()}};
    return;
  }
  fmt::print("model\n{}\n", model.summary());
}

void CheckReport::finish() const {
  if (json_) fmt::print("{}\n", dump_line(out_));
}

}  // namespace distrain::cli
