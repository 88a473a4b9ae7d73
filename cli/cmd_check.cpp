// distrain check RECIPE [--set KEY=VALUE]...: validates the recipe and its data, builds
// the model, prints the resolved plan. Trains nothing.
#include <fmt/ranges.h>

#include <fstream>
#include <optional>
#include <utility>

#include "cli/commands.hpp"
#include "cli/mesh_plan.hpp"
#include "core/backend/backend.hpp"
#include "core/backend/gpu_info.hpp"
#include "core/base/host_memory.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/io/recipe.hpp"
#include "core/model/no_storage.hpp"
#include "core/optim/lr_schedule.hpp"
#include "core/optim/optimizer.hpp"
#include "core/strategy/mesh_strategy.hpp"
#include "core/strategy/ps_protocol.hpp"
#include "core/strategy/strategy.hpp"
#include "core/strategy/zero_memory.hpp"
#include "core/train/preflight.hpp"
#include "core/train/step_loop.hpp"

namespace distrain::cli {

namespace {

// `largest`: the largest predicted device total; budget 0: none.
void check_within_budget(const Recipe& recipe, int64_t largest, int64_t budget) {
  DT_USER_CHECK(budget == 0 || largest <= budget,
                "{}: a device would need {} (predicted above), over strategy.device_memory = {}; shard (strategy.name = "
                "\"zero\" or \"mesh\"), offload (strategy.offload_optimizer) or recompute (train.recompute) to need less",
                recipe.file, format_bytes(largest), format_bytes(budget));
}

// How a recipe whose processes come from a launcher starts, and what its servers hold.
void print_launch(const Recipe& recipe) {
  const std::string& name = recipe.strategy.name;
  if (name == "multi_worker_mirrored")
    fmt::print("launch      mpirun -np N distrain train {} (one worker per process, N processes; on one host add "
               "--oversubscribe when N exceeds its cores); the figures below are one worker's\n",
               recipe.file);
  if (name != "parameter_server") return;
  const int64_t servers = recipe.strategy.num_ps;
  fmt::print("launch      mpirun -np N distrain train {} with N > num_ps = {}: ranks 0..{} serve, the other N - {} "
             "train; the figures below are one worker's\n",
             recipe.file, servers, servers - 1, servers);
  const Model layout(recipe.model(), backend_for(Device{}), storage_free_seams());
  const PsRanges ranges{layout.params().trainable_arena_size(), static_cast<int>(servers)};
  const int64_t slots = static_cast<int64_t>(make_optimizer(recipe.optimizer)->slots().size());
  const auto element = static_cast<int64_t>(dtype_size(ParamArena::kDType));
  for (int k = 0; k < ranges.servers; ++k)
    fmt::print("server {:<4}rank {}: values [{}, {}) of the trainable arena, {} with its optimizer's {} slot(s)\n",
               k, k, ranges.begin(k), ranges.begin(k + 1), format_mib(ranges.length(k) * element * (1 + slots)), slots);
}

// ZeRO stage 1 shards only the optimizer's state: its gradients line is larger than a
// replica's parameters, which surprises.
void print_memory_note(const Recipe& recipe) {
  if (recipe.strategy.name == "zero" && recipe.strategy.zero_stage == 1)
    fmt::print("note        zero stage 1 shards only the optimizer state: each replica keeps whole gradients and whole "
               "parameters, and beside them its shard of the reduced gradients with a one-layer bucket for the "
               "reduce-scatter (gradients), and its shard of the updated parameters (parameters)\n");
}

// What strategy.offload_optimizer puts in host memory.
const char* offloaded_what(const Recipe& recipe) {
  const bool zero_bf16 = recipe.strategy.name == "zero" && recipe.train.matmul_dtype == DType::bf16;
  const bool masters = zero_bf16 || sharded_masters(recipe);
  return masters ? "the optimizer state and the float32 master weights" : "the optimizer state";
}

// " (ant, bee, ...)": the classes' names where the data names them, the first ten.
std::string class_list(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  const size_t shown = std::min<size_t>(names.size(), 10);
  return fmt::format(" ({}{})", fmt::join(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                     names.size() > shown ? ", ..." : "");
}

// What a run of this recipe is, with `replicas` data-parallel replicas: its data, batch,
// steps, optimizer, rate, loss, precision and checkpoints.
void print_run(const Recipe& recipe, const Splits& data, const std::string& strategy, int replicas,
               const std::string& optimizer, int64_t update_batch) {
  const int64_t global = recipe.step_batch() * replicas;
  const int64_t per_epoch =
      Loader(data.train, LoaderSpec{recipe.step_batch(), replicas, false, recipe.data.drop_remainder}).batches_per_epoch();
  check_planned_steps(recipe, per_epoch);
  const int64_t planned = per_epoch * recipe.train.epochs;
  const int64_t total = recipe_plan(recipe, per_epoch).total_steps;
  const LrSchedule schedule(recipe.optimizer.learning_rate, recipe.schedule, update_batch, total);
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
  if (const std::string unfinished = schedule.unfinished(); !unfinished.empty()) fmt::print("warning     {}\n", unfinished);
  fmt::print("loss        {}{}\n",
             recipe.loss.type == LossType::mean_squared_error ? "mean_squared_error" : "sparse_categorical_crossentropy",
             recipe.loss.from_logits ? " (from logits)" : "");
  fmt::print("precision   {}\n", recipe.train.matmul_dtype == DType::bf16
                                        ? "bf16 operands in dense and attention matrix products, float32 accumulation; "
                                          "layer outputs kept in bf16 (float32 copies while read); layers read "
                                          "their weights rounded to bf16; master weights, gradients, optimizer "
                                          "state, losses and checkpoints float32"
                                        : "float32");
  fmt::print("checkpoint  {} (every {} epoch(s), every {} step(s), keep {})\n", recipe.checkpoint.dir,
             recipe.checkpoint.every_epochs, recipe.checkpoint.every_steps, recipe.checkpoint.keep);
}

void print_memory(const Recipe& recipe, const MemoryUse& mem) {
  fmt::print("memory      per replica: parameters {}, gradients {}, optimizer {}, activations {}{}; device total {}\n",
             format_mib(mem.parameters), format_mib(mem.gradients), format_mib(mem.optimizer), format_mib(mem.activations),
             mem.offloaded ? fmt::format(" (in host memory: {}, {})", format_mib(mem.offloaded), offloaded_what(recipe)) : "",
             format_mib(mem.device_total()));
  print_memory_note(recipe);
}

// The GPUs a plan is made for exist on this machine: check builds no backend for a mesh
// or unbuilt zero replicas, and would otherwise plan for a device train cannot open.
void check_devices_present(const Recipe& recipe) {
  std::optional<GpuInfo> gpus;
  for (const std::string& name : recipe.strategy.devices) {
    const Device device = Device::parse(name, recipe.file + ": strategy.devices");
    if (device.is_cpu()) continue;
    if (!gpus) gpus = gpu_info();
    const std::string problem = !gpus->problem.empty() ? gpus->problem
                                : !gpus->built          ? "this distrain has no CUDA plugin"
                                                        : "";
    DT_USER_CHECK(problem.empty(), "{}: strategy.devices: device {}: {}", recipe.file, name, problem);
    DT_USER_CHECK(device.index < static_cast<int>(gpus->devices.size()), "{}: strategy.devices: device {}: this machine has {} GPU(s)",
                  recipe.file, name, gpus->devices.size());
  }
}

// zero replicas this host cannot hold in one process (zero_over_host, `mem` each): the plan
// from the recipe alone, as one process per device would hold it, without building them.
void check_zero_unbuilt(const Recipe& recipe, const Splits& data, int64_t budget, const MemoryUse& mem) {
  check_devices_present(recipe);
  const int replicas = planned_replicas(recipe);
  const std::string strategy = fmt::format("zero stage {}: {} replica(s), predicted without building them (host below)",
                                           recipe.strategy.zero_stage, replicas);
  print_run(recipe, data, strategy, replicas, make_optimizer(recipe.optimizer)->describe(), recipe.step_batch() * replicas);
  print_memory(recipe, mem);
  fmt::print("host        this process's {} replica(s) would need {} of host memory, more than is available; train them "
             "under mpirun, one process per device (strategy.devices one each)\n",
             recipe.strategy.devices.size(), format_mib(host_bytes_of_replicas(recipe, mem)));
  const Model layout(recipe.model(), backend_for(Device{}), storage_free_seams());
  fmt::print("model\n{}\n", layout.summary());
  check_within_budget(recipe, mem.device_total(), budget);
}

// A mesh's ranks come from the launcher: the plan of each, from models of each rank's part
// (never the whole model, which the host need not hold), then the run.
void check_mesh(const Recipe& recipe, const Splits& data) {
  check_devices_present(recipe);
  check_within_budget(recipe, print_mesh_plan(stdout, recipe), recipe.strategy.device_memory);
  const StrategySpec& s = recipe.strategy;
  const std::string shape = fmt::format("mesh: data {} x tensor {} x pipeline {} ({} ranks, each on {})", s.mesh_data,
                                        s.mesh_tensor, s.mesh_pipeline, s.mesh_data * s.mesh_tensor * s.mesh_pipeline,
                                        mesh_devices(s));
  print_run(recipe, data, shape, static_cast<int>(s.mesh_data), make_optimizer(recipe.optimizer)->describe(),
            recipe.step_batch() * s.mesh_data);
  const Model layout(recipe.model(), backend_for(Device{}), storage_free_seams());
  fmt::print("model\n{}\n", layout.summary());
}

}  // namespace

void register_check(CLI::App& app) {
  auto* cmd = app.add_subcommand("check", "Validate a recipe and print the resolved plan; trains nothing");
  auto recipe_path = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  cmd->add_option("recipe", *recipe_path, "Recipe file (TOML)")->required();
  cmd->add_option("--set", *overrides, "Override a recipe key (repeatable)");
  cmd->callback([=] {
    Recipe recipe = load_recipe(*recipe_path, *overrides);
    for (const std::string& notice : recipe.notices) fmt::print("note: {}\n", notice);
    const bool alone = launcher_size() <= 1;  // the ranks a launcher would start are planned here
    if (alone) print_launch(recipe);
    if (recipe.strategy.name == "parameter_server" && alone) recipe.strategy.name = "one_device";
    const Splits data = load_dataset(recipe.data, recipe.seed);
    check_data_fits(recipe, data.train);
    if (recipe.strategy.name == "mesh" && alone) return check_mesh(recipe, data);
    // check predicts past the budget, rather than stop at the first allocation over it, and
    // then says whether a device is over.
    const int64_t budget = std::exchange(recipe.strategy.device_memory, 0);
    if (const std::optional<MemoryUse> over = zero_over_host(recipe)) return check_zero_unbuilt(recipe, data, budget, *over);
    const std::optional<int64_t> host_available = available_host_memory();
    auto strategy = make_strategy(recipe);
    check_memory_fits(recipe, *strategy, host_available);
    const int replicas = strategy->num_replicas();
    print_run(recipe, data, strategy->describe(), replicas, strategy->optimizer().describe(),
              strategy->update_batch(recipe.step_batch() * replicas));
    const MemoryUse mem = strategy->memory_per_replica(recipe.strategy.per_replica_batch);
    print_memory(recipe, mem);
    fmt::print("model\n{}\n", strategy->model().summary());
    check_within_budget(recipe, mem.device_total(), budget);
  });
}

}  // namespace distrain::cli
