#include "core/strategy/strategy.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>

#include "core/backend/backend.hpp"
#include "core/base/log.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/io/strategy_kind.hpp"

namespace distrain {

LossStats sum_over_workers(const LossStats& local, Communicator& world) {
  double v[3] = {local.loss_sum, static_cast<double>(local.correct), static_cast<double>(local.count)};
  world.all_reduce(host_tensor(v, 3), ReduceOp::sum);
  return LossStats{v[0], static_cast<int64_t>(v[1]), static_cast<int64_t>(v[2])};
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

void Strategy::train_step(const Batch& batch, const StepInfo& info) {
  const auto t0 = std::chrono::steady_clock::now();
  ledger_.begin_step();
  try {
    compute_gradients(batch, info);
    times_.compute = seconds_since(t0);
    reduce_check_update(info);
  } catch (...) {
    ledger_.drop_open_step();
    throw;
  }
  ledger_.commit(info.step + 1);
  times_.update = seconds_since(t0) - times_.compute - times_.reduce;
}

// The reduction, the check and the update, timed as reduce (with the check) and update.
void Strategy::reduce_check_update(const StepInfo& info) {
  const auto t1 = std::chrono::steady_clock::now();
  // On a GPU the check is read later, the loop stopping there if need be; on the CPU the
  // figures are at hand, so the step is decided before its update as on the host path.
  const ReducedGradients on_device = reduced_gradients();
  if (on_device.backend && !on_device.grads.device.is_cpu() && !info.skip_nonfinite) {
    reduce_gradients();
    ledger_.check(*on_device.backend, on_device.grads);
    const StepInfo update = clipped(info);
    times_.reduce = seconds_since(t1);
    apply_update(update);
    return;
  }
  bool finite = finite_on_every_worker(std::isfinite(ledger_.losses_now().loss_sum));
  if (finite) {
    reduce_gradients();
    finite = gradients_finite();
  }
  ledger_.check(finite);
  const StepInfo update = finite ? clipped(info) : info;
  times_.reduce = seconds_since(t1);
  if (finite) apply_update(update);
  else if (info.skip_nonfinite) discard_step();
}

// As torch.nn.utils.clip_grad_norm_: g *= clip / (norm + 1e-6) when the norm exceeds clip.
StepInfo Strategy::clipped(const StepInfo& info) {
  if (info.clip_norm <= 0) return info;
  const double norm = std::sqrt(gradient_sum_of_squares());
  ledger_.record_grad_norm(norm);
  StepInfo out = info;
  if (norm > info.clip_norm) out.gradient_scale = static_cast<float>(info.clip_norm / (norm + 1e-6));
  return out;
}

double Strategy::gradient_sum_of_squares() {
  const ReducedGradients g = reduced_gradients();
  DT_CHECK(g.backend, "strategy {} neither sums its gradients' squares nor says where they are", name());
  return sum_of_squares(*g.backend, g.grads);
}

bool Strategy::gradients_finite() {
  const ReducedGradients g = reduced_gradients();
  DT_CHECK(g.backend, "strategy {} neither checks its gradients nor says where they are", name());
  return all_finite(*g.backend, g.grads);
}

std::vector<StepResult> Strategy::read_steps() {
  std::vector<StepResult> steps = ledger_.read();
  sum_steps_over_workers(steps);
  for (StepResult& s : steps) s.finite = s.finite && std::isfinite(s.stats.loss_sum);
  return steps;
}

void sum_over_workers(std::vector<StepResult>& steps, Communicator& world) {
  if (steps.empty()) return;  // every worker read after the same steps: none anywhere
  std::vector<double> v;
  for (const StepResult& s : steps)
    v.insert(v.end(), {s.stats.loss_sum, static_cast<double>(s.stats.correct), static_cast<double>(s.stats.count)});
  world.all_reduce(host_tensor(v.data(), static_cast<int64_t>(v.size())), ReduceOp::sum);
  for (size_t i = 0; i < steps.size(); ++i)
    steps[i].stats = LossStats{v[3 * i], static_cast<int64_t>(v[3 * i + 1]), static_cast<int64_t>(v[3 * i + 2])};
}

TrafficTheory gradient_traffic(const std::string& ops, double passes, int n, const Model& model) {
  int64_t gradient_bytes = 0;
  for (const Range& r : model.trainable_ranges()) gradient_bytes += r.size() * static_cast<int64_t>(dtype_size(ParamArena::kDType));
  const std::string factor = passes == 1 ? "" : fmt::format("{:g}", passes);
  return {fmt::format("{}: {}(N-1)/N x G", ops, factor), passes * static_cast<double>(gradient_bytes) * (n - 1) / n};
}

std::vector<std::pair<int64_t, int64_t>> Strategy::device_memory_over_job(int64_t per_replica_batch) {
  const MemoryUse m = memory_per_replica(per_replica_batch);
  const auto predicted = static_cast<double>(m.device_total());
  const int local = local_replicas();
  std::vector<double> figures(2 * static_cast<size_t>(workers() * local), 0.0);  // exact below 2^53 bytes
  for (int r = 0; r < local; ++r) {
    const auto at = 2 * static_cast<size_t>(rank() * local + r);
    figures[at] = static_cast<double>(replica_backend(r).memory().peak());
    figures[at + 1] = predicted;
  }
  sum_figures_over_workers(figures);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t i = 0; i < figures.size(); i += 2)
    out.emplace_back(static_cast<int64_t>(figures[i]), static_cast<int64_t>(figures[i + 1]));
  return out;
}

Backend& optimizer_place(const StrategySpec& spec, Backend& device) {
  if (!spec.offload_optimizer()) return device;
  DT_USER_CHECK(device.device().is_cpu(), "strategy.offload_optimizer: the host updates a device's parameters in place, "
                "which needs cpu devices in this version (got {})", device.device().str());
  return host_backend();
}

int max_over(int local, Communicator& world) {
  float v = static_cast<float>(local);  // exact: the values are small integers
  world.all_reduce(host_tensor(&v, 1), ReduceOp::max);
  return static_cast<int>(v);
}

namespace {

// Ranks on one host share its cores. strategy.threads is the recipe's choice and is kept;
// OMP_NUM_THREADS, often exported for every program of a shell, is kept while the ranks'
// threads fit the host's cores. Past them each rank takes its share, saying so: 4 ranks of
// 2 threads on 2 cores ran a multi-worker job at 0.06x (waiting threads spinning) and, with
// them yielding, still at 0.55x of 4 ranks of 1 thread.
// A rank allowed fewer cores than the host has (mpirun binds a few ranks to a core each; a
// cpuset may hold all of them) cannot tell from its own mask whether the others share its
// cores: it takes its share as if they did, and says what it was allowed.
void choose_cpu_threads(const Recipe& recipe) {
  const int local = std::max(1, launcher_local_size()), cores = cpu_cores();
  const int host = std::max(cores, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  const bool bound = local > 1 && cores < host;
  const int share = std::max(1, cores / local);
  const char* env = std::getenv("OMP_NUM_THREADS");
  const int from_env = env ? std::atoi(env) : 0;
  const auto over = [&](int threads) {
    return fmt::format("{} rank(s) of {} thread(s) on this host's {} core(s) are {} threads", local, threads, cores,
                       local * threads);
  };
  if (recipe.strategy.threads > 0) {
    set_cpu_threads(recipe.strategy.threads);
    if (local * recipe.strategy.threads > cores)
      log::info("note: {}, more than its cores (strategy.threads = {}): they take turns; {} thread(s) each fit", over(recipe.strategy.threads),
                recipe.strategy.threads, share);
    return;
  }
  if (from_env > 0 && (local * from_env <= cores || from_env <= share)) return;  // fits, or cannot do with fewer
  if (from_env > 0 && local == 1) {
    log::info("note: {} (OMP_NUM_THREADS = {}), more than its cores: they take turns; set OMP_NUM_THREADS={} for one each",
              over(from_env), from_env, cores);
    return;
  }
  if (local == 1) return;
  set_cpu_threads(share);
  if (bound && from_env <= 0) {
    log::info("{} ranks on this host, each allowed {} of its {} cores (the launcher's binding or a cpuset): {} thread(s) each "
              "(strategy.threads or OMP_NUM_THREADS sets another count)", local, cores, host, share);
    return;
  }
  if (from_env > 0)
    log::info("note: {} (OMP_NUM_THREADS = {}), more than its cores: each rank takes {} thread(s) instead "
              "(strategy.threads sets a count that is kept)", over(from_env), from_env, share);
  else
    log::info("{} ranks share this host's {} core(s): {} thread(s) each (strategy.threads or OMP_NUM_THREADS sets another count)",
              local, cores, share);
}

std::unique_ptr<Strategy> build_strategy(const Recipe& recipe, bool alone_in_job, const Mesh* mesh) {
  const StrategyKind& kind = recipe.strategy.kind();
  // Several processes training the same single-process job would write the same files.
  DT_USER_CHECK(kind.processes() != StrategyKind::Processes::one || launcher_size() <= 1 || alone_in_job,
                "{}: strategy '{}' runs in one process but {} were launched; use strategy.name = \"multi_worker_mirrored\" "
                "(or zero, parameter_server) under mpirun/srun",
                recipe.file, kind.name(), launcher_size());
  choose_cpu_threads(recipe);
  set_allow_tf32(recipe.train.allow_tf32);
  return mesh ? kind.make_on(recipe, *mesh) : kind.make(recipe);
}

}  // namespace

std::unique_ptr<Strategy> make_strategy(const Recipe& recipe, bool alone_in_job, const Mesh* mesh) {
  for (const Device& d : recipe.strategy.kind().devices_of_this_process(recipe)) {  // every buffer from here on counts
    DeviceMemory& memory = backend_for(d).memory();
    memory.set_budget(recipe.strategy.device_memory);
    memory.reset_peak();
  }
  static const std::string kPurpose = "the strategy's model, optimizer and communication buffers";
  const MemoryPurpose purpose(kPurpose);
  auto strategy = build_strategy(recipe, alone_in_job, mesh);
  // The checks made before it was built counted these replicas.
  DT_CHECK(strategy->num_replicas() == planned_replicas(recipe), "strategy {} has {} replicas, {} were planned",
           strategy->name(), strategy->num_replicas(), planned_replicas(recipe));
  return strategy;
}

// Defined here, where a Strategy is whole.
std::unique_ptr<Strategy> StrategyKind::make_on(const Recipe&, const Mesh&) const {
  DT_CHECK(false, "a mesh given to strategy '{}'", name());
  return nullptr;
}

int planned_replicas(const Recipe& recipe) {
  return recipe.strategy.kind().replicas(recipe.strategy, launcher_size());
}

}  // namespace distrain
