// distrain check RECIPE [--set KEY=VALUE]... [--json] [--without-data]: validates the recipe and its data,
// builds the model (or predicts it per rank), prints the resolved plan. Trains nothing.
#include <fmt/ranges.h>

#include <fstream>
#include <optional>
#include <utility>

#include "cli/check_report.hpp"
#include "cli/commands.hpp"
#include "core/backend/backend.hpp"
#include "core/backend/gpu_info.hpp"
#include "core/base/host_memory.hpp"
#include "core/base/log.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/io/recipe.hpp"
#include "core/io/strategy_kind.hpp"
#include "core/model/no_storage.hpp"
#include "core/optim/optimizer.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/preflight.hpp"

namespace distrain::cli {

namespace {

// `largest`: the largest predicted device total; budget 0: none.
void check_within_budget(const Recipe& recipe, int64_t largest, int64_t budget) {
  DT_USER_CHECK(budget == 0 || largest <= budget,
                "{}: a device would need {} (predicted above), over strategy.device_memory = {}; shard (strategy.name = "
                "\"zero\" or \"mesh\"), offload (strategy.offload_optimizer) or recompute (train.recompute) to need less",
                recipe.file, format_bytes(largest), format_bytes(budget));
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

// Replicas this host cannot hold in one process (replicas_over_host, `mem` each): the plan
// from the recipe alone, as one process per device would hold it, without building them.
void check_unbuilt(CheckReport& report, const Recipe& recipe, const Splits* data, int64_t budget, const MemoryUse& mem) {
  check_devices_present(recipe);
  const int replicas = planned_replicas(recipe);
  const std::string strategy = fmt::format("{}: {} replica(s), predicted without building them (host below)",
                                           recipe.strategy.kind().label(recipe.strategy), replicas);
  report.run(recipe, data, strategy, replicas, make_optimizer(recipe.optimizer)->describe(), recipe.step_batch() * replicas);
  report.memory(recipe, mem);
  report.unbuilt_host(recipe.strategy.devices.size(), host_bytes_of_replicas(recipe, mem));
  report.model(Model(recipe.model(), backend_for(Device{}), storage_free_seams()));
  report.finish();
  check_within_budget(recipe, mem.device_total(), budget);
}

// A strategy checked per rank (the mesh, whose ranks come from the launcher): the plan of
// each, from models of each rank's part (never the whole model, which the host need not
// hold), then the run.
void check_per_rank(CheckReport& report, const Recipe& recipe, const Splits* data) {
  check_devices_present(recipe);
  const int64_t largest = report.mesh_ranks(recipe);
  const int replicas = planned_replicas(recipe);
  report.run(recipe, data, recipe.strategy.kind().label(recipe.strategy), replicas,
             make_optimizer(recipe.optimizer)->describe(), recipe.step_batch() * replicas);
  report.model(Model(recipe.model(), backend_for(Device{}), storage_free_seams()));
  report.finish();
  check_within_budget(recipe, largest, recipe.strategy.device_memory);
}

// A strategy built here, its memory taken from what it holds.
void check_built(CheckReport& report, Recipe recipe, const Splits* data) {
  // check predicts past the budget, rather than stop at the first allocation over it, and
  // then says whether a device is over.
  const int64_t budget = std::exchange(recipe.strategy.device_memory, 0);
  if (const std::optional<MemoryUse> over = replicas_over_host(recipe)) return check_unbuilt(report, recipe, data, budget, *over);
  const std::optional<int64_t> host_available = available_host_memory();
  auto strategy = make_strategy(recipe);
  check_memory_fits(recipe, *strategy, host_available);
  const int replicas = strategy->num_replicas();
  report.run(recipe, data, strategy->describe(), replicas, strategy->optimizer().describe(),
             strategy->update_batch(recipe.step_batch() * replicas));
  const MemoryUse mem = strategy->memory_per_replica(recipe.strategy.per_replica_batch);
  report.memory(recipe, mem);
  report.model(strategy->model());
  report.finish();
  check_within_budget(recipe, mem.device_total(), budget);
}

// The recipe's data; where it cannot be read, the error says how to check without it.
Splits read_data(const Recipe& recipe) {
  try {
    return load_dataset(recipe.data, recipe.seed);
  } catch (const UserError& e) {
    throw UserError(fmt::format("{} (check --without-data plans the run without it)", e.what()));
  }
}

}  // namespace

void register_check(CLI::App& app) {
  auto* cmd = app.add_subcommand("check", "Validate a recipe and print the resolved plan; trains nothing");
  auto recipe_path = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  cmd->add_option("recipe", *recipe_path, "Recipe file (TOML)")->required();
  cmd->add_option("--set", *overrides, "Override a recipe key (repeatable)");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print one JSON object (its notes and progress on stderr)");
  auto without_data = std::make_shared<bool>(false);
  cmd->add_flag("--without-data", *without_data,
                "Plan from the recipe alone, as plan does: the data is not read (its sizes and the steps per epoch unknown)");
  cmd->callback([=] {
    if (*json) log::set_info_stream(stderr);
    CheckReport report(*json);
    Recipe recipe = load_recipe(*recipe_path, *overrides);
    report.notices(recipe.notices);
    const bool alone = launcher_size() <= 1;  // the ranks a launcher would start are planned here
    if (alone) {
      report.launch(recipe.strategy.kind().launch_lines(recipe));
      recipe.strategy.name = recipe.strategy.kind().checked_alone_as();
    }
    const std::optional<Splits> data = *without_data ? std::nullopt : std::optional<Splits>(read_data(recipe));
    if (data) check_data_fits(recipe, data->train);
    const Splits* read = data ? &*data : nullptr;
    if (recipe.strategy.kind().checked_per_rank() && alone) return check_per_rank(report, recipe, read);
    check_built(report, recipe, read);
  });
}

}  // namespace distrain::cli
