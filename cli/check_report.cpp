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

void CheckReport::run(const Recipe& recipe, const Splits& data, const std::string& strategy, int replicas,
                      const std::string& optimizer, int64_t update_batch) {
  const int64_t global = recipe.step_batch() * replicas;
  const int64_t per_epoch =
      Loader(data.train, LoaderSpec{recipe.step_batch(), replicas, false, recipe.data.drop_remainder}).batches_per_epoch();
  check_planned_steps(recipe, per_epoch);
  const int64_t planned = per_epoch * recipe.train.epochs;
  const int64_t total = recipe_plan(recipe, per_epoch).total_steps;
  const LrSchedule schedule(recipe.optimizer.learning_rate, recipe.schedule, update_batch, total);
  const std::string unfinished = schedule.unfinished();
  if (json_) {
    out_["recipe"] = {{"name", recipe.name}, {"file", recipe.file}};
    out_["data"] = {{"dataset", recipe.data.dataset}, {"train_examples", data.train.size()},
                    {"test_examples", data.test.size()}, {"example_shape", data.train.example_shape.dims()},
                    {"classes", data.train.num_classes}, {"class_names", data.train.class_names}};
    out_["strategy"] = {{"name", recipe.strategy.name}, {"description", strategy}, {"replicas", replicas},
                        {"per_replica_batch", recipe.strategy.per_replica_batch},
                        {"accumulate_steps", recipe.train.accumulate_steps}, {"global_batch", global}};
    out_["steps"] = {{"per_epoch", per_epoch}, {"epochs", recipe.train.epochs}, {"planned", planned}, {"total", total}};
    out_["optimizer"] = optimizer;
    out_["learning_rate"] = schedule.describe();
    if (!unfinished.empty()) out_["warnings"] = {unfinished};
    out_["loss"] = {{"type", loss_name(recipe)}, {"from_logits", recipe.loss.from_logits}};
    out_["precision"] = recipe.train.matmul_dtype == DType::bf16 ? "bf16" : "float32";
    out_["checkpoint"] = {{"dir", recipe.checkpoint.dir}, {"every_epochs", recipe.checkpoint.every_epochs},
                          {"every_steps", recipe.checkpoint.every_steps}, {"keep", recipe.checkpoint.keep}};
    return;
  }
  fmt::print("recipe      {} ({})\n", recipe.name, recipe.file);
  fmt::print("data        {}: {} train / {} test examples of {}, {} classes{}\n", recipe.data.dataset, data.train.size(),
             data.test.size(), data.train.example_shape.str(), data.train.num_classes, class_list(data.train.class_names));
  const std::string micro = recipe.train.accumulate_steps > 1
                                ? fmt::format(" ({} micro-batches of {}, train.accumulate_steps)", recipe.train.accumulate_steps,
                                              recipe.strategy.per_replica_batch)
                                : "";
  fmt::print("strategy    {}; {} replica(s) x {} per replica{} = global batch {}\n", strategy, replicas, recipe.step_batch(),
             micro, global);
  fmt::print("steps       {} per epoch x {} epochs = {}{}\n", per_epoch, recipe.train.epochs, planned,
             total < planned ? fmt::format(", capped at {} by train.steps", total) : "");
  fmt::print("optimizer   {}\n", optimizer);
  fmt::print("learn rate  {}\n", schedule.describe());
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
