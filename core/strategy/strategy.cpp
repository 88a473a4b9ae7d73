#include "core/strategy/strategy.hpp"

#include "core/backend/backend.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/strategy/central_storage.hpp"
#include "core/strategy/mesh_strategy.hpp"
#include "core/strategy/mirrored.hpp"
#include "core/strategy/one_device.hpp"
#include "core/strategy/parameter_server.hpp"
#include "core/strategy/zero.hpp"

namespace distrain {

LossStats sum_over_workers(const LossStats& local, Communicator& world) {
  double v[3] = {local.loss_sum, static_cast<double>(local.correct), static_cast<double>(local.count)};
  world.all_reduce(host_tensor(v, 3), ReduceOp::sum);
  return LossStats{v[0], static_cast<int64_t>(v[1]), static_cast<int64_t>(v[2])};
}

TrafficTheory gradient_traffic(const std::string& ops, int passes, int n, const Model& model) {
  int64_t gradient_bytes = 0;
  for (const Range& r : model.trainable_ranges()) gradient_bytes += r.size() * 4;
  const std::string factor = passes == 1 ? "" : std::to_string(passes);
  return {fmt::format("{}: {}(N-1)/N x G", ops, factor), passes * static_cast<double>(gradient_bytes) * (n - 1) / n};
}

int max_over(int local, MpiCommunicator& world) {
  float v = static_cast<float>(local);  // exact: the values are small integers
  world.all_reduce(host_tensor(&v, 1), ReduceOp::max);
  return static_cast<int>(v);
}

namespace {

std::unique_ptr<Strategy> build_strategy(const Recipe& recipe) {
  const std::string& name = recipe.strategy.name;
  // Several processes training the same single-process job would write the same files.
  DT_USER_CHECK(name == "multi_worker_mirrored" || name == "zero" || name == "parameter_server" || name == "mesh" ||
                    launcher_size() <= 1,
                "{}: strategy '{}' runs in one process but {} were launched; use strategy.name = \"multi_worker_mirrored\" "
                "(or zero, parameter_server) under mpirun/srun",
                recipe.file, name, launcher_size());
  if (recipe.strategy.threads > 0) set_cpu_threads(recipe.strategy.threads);
  set_allow_tf32(recipe.train.allow_tf32);
  if (name == "one_device") return make_one_device(recipe);
  if (name == "mirrored") return make_mirrored(recipe, false);
  if (name == "multi_worker_mirrored") return make_mirrored(recipe, true);
  if (name == "central_storage") return make_central_storage(recipe);
  if (name == "zero") return make_zero(recipe);
  if (name == "parameter_server") return make_parameter_server(recipe);
  if (name == "mesh") return make_mesh_strategy(recipe);
  throw UserError(fmt::format("{}: strategy.name: unknown strategy '{}'", recipe.file, name));
}

}  // namespace

std::unique_ptr<Strategy> make_strategy(const Recipe& recipe) {
  auto strategy = build_strategy(recipe);
  // The checks made before it was built counted these replicas.
  DT_CHECK(strategy->num_replicas() == planned_replicas(recipe), "strategy {} has {} replicas, {} were planned",
           strategy->name(), strategy->num_replicas(), planned_replicas(recipe));
  return strategy;
}

int planned_replicas(const Recipe& recipe) {
  const StrategySpec& s = recipe.strategy;
  const int devices = static_cast<int>(s.devices.size());
  if (s.name == "parameter_server") return launcher_size() - static_cast<int>(s.num_ps);  // one per worker; servers train none
  if (s.name == "mesh") return static_cast<int>(s.mesh_data);  // a tensor group shares its data rank's slice
  if (s.name == "multi_worker_mirrored" || s.name == "zero") return devices * launcher_size();  // zero: all ranks, when launched
  return devices;
}

}  // namespace distrain
