// distrain bench RECIPE [--strategy NAME --replicas 1,2,4 [--mode weak|strong]]
//                       [--steps N] [--warmup N] [--json] [--csv FILE] [--svg FILE] [--profile]
// Training-step throughput (forward, backward, gradient reduction, update), measured by
// core/train/bench_measure.hpp on the Trainer's own steps, so what bench times is what
// trains. With --replicas, one point per replica count and a scaling table
// (bench_scaling.cpp); points of strategies launched per replica are run by `mpirun -np N`
// of this executable (bench_mpirun.cpp). With --profile, one point's step per layer
// (core/train/step_profile.hpp).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/bench_args.hpp"
#include "cli/bench_load.hpp"
#include "cli/scaling_chart.hpp"
#include "core/backend/backend.hpp"
#include "core/base/host_memory.hpp"
#include "core/base/json.hpp"
#include "core/base/openmp_wait.hpp"
#include "core/base/log.hpp"
#include "core/base/rng.hpp"
#include "core/base/stop_signal.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/io/recipe.hpp"
#include "core/io/strategy_kind.hpp"
#include "core/model/no_storage.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/bench_measure.hpp"
#include "core/train/preflight.hpp"
#include "core/train/step_profile.hpp"
#include "core/train/step_timing.hpp"

namespace distrain::cli {

namespace {

// Each replica's (rank's) device: measured peak / predicted, in MiB, and the ratio.
void print_replica_memory(const std::vector<std::pair<int64_t, int64_t>>& figures) {
  std::string line;
  for (size_t r = 0; r < figures.size(); ++r) {
    const auto [measured, predicted] = figures[r];
    line += fmt::format("{}{}: {:.1f}/{:.1f} ({:.2f}x)", r ? ", " : "", r, static_cast<double>(measured) / (1 << 20),
                        static_cast<double>(predicted) / (1 << 20),
                        predicted > 0 ? static_cast<double>(measured) / static_cast<double>(predicted) : 0.0);
  }
  fmt::print("  device memory per replica, measured peak/predicted MiB: {}\n", line);
}

// Bytes per step and rank beside theory's, G the gradient bytes a replica reduces (N-1)/N
// of which each rank sends in a ring.
void print_sent(const Measured& m) {
  std::string line = fmt::format("  sent per step per rank: {:.0f} B in {:.0f} collectives among replicas", m.data_bytes,
                                 m.data_collectives);
  if (!m.theory.formula.empty())
    line += fmt::format(" (theory {} = {:.0f} B, measured/theory {:.3f})", m.theory.formula, m.theory.bytes,
                        m.theory.bytes > 0 ? m.data_bytes / m.theory.bytes : 0.0);
  if (m.tensor_bytes > 0)
    line += fmt::format("; {:.0f} B in {:.0f} collectives along the tensor axis", m.tensor_bytes, m.tensor_collectives);
  fmt::print("{}\n", line);
}

// The bubble: each stage's idle share of the step (median) beside theory's (P-1)/(M+P-1),
// which assumes stages of equal cost; and the activations each stage holds at once.
void print_stages(const Measured& m) {
  std::string idle, bytes;
  for (size_t st = 0; st < m.stage_idle.size(); ++st) {
    idle += fmt::format(" {:.3f}", m.stage_idle[st]);
    bytes += fmt::format(" {}", m.stage_activations[st]);
  }
  fmt::print("  pipeline, {}: idle share per stage{} (theory {:.3f}); activation bytes per stage{}\n", m.pipeline, idle,
             m.idle_theory, bytes);
}

// One point, as worker 0 reports it: a JSON object, or three to five lines.
void print_point(const Measured& m, const std::string& recipe_name, int64_t warmup, bool json) {
  if (json) {
    Json j = to_json(m, recipe_name);
    if (m.profile) j["profile"] = profile_json(*m.profile);
    if (m.profile && !m.profile->not_profiled.empty()) j["profile_note"] = m.profile->not_profiled;
    fmt::print("{}\n", dump_line(j));
    return;
  }
  fmt::print("{}: {} replica(s) of {}, global batch {}, {} timed steps after {} warm-up{}\n", recipe_name, m.replicas,
             m.strategy, m.global_batch, m.steps, warmup,
             m.read_every > 1 ? fmt::format(", figures read every {} steps", m.read_every) : "");
  // One replica reduces nothing: no reduction share to show.
  const bool reduces = m.replicas > 1 || m.data_bytes > 0 || m.tensor_bytes > 0;
  const std::string rate = m.tokens_per_example > 1
                               ? fmt::format("{:.0f} tokens/s ({:.1f} sequences/s)",
                                             m.images_per_sec * static_cast<double>(m.tokens_per_example), m.images_per_sec)
                               : fmt::format("{:.0f} images/s", m.images_per_sec);
  fmt::print("  {}   step ms: min {:.2f}  median {:.2f}  max {:.2f}{}\n", rate, m.min_ms, m.median_ms, m.max_ms,
             reduces ? fmt::format("   gradient reduction {:.1f}%", 100 * m.comm_share) : "");
  fmt::print("  per replica: parameters {} B, gradients {} B, optimizer {} B, activations {} B\n", m.memory.parameters,
             m.memory.gradients, m.memory.optimizer, m.memory.activations);
  const int64_t predicted = m.memory.device_total();
  fmt::print("  device memory on {}: measured peak {} B, predicted {} B ({:.2f}x)\n", m.device, m.device_peak, predicted,
             predicted > 0 ? static_cast<double>(m.device_peak) / static_cast<double>(predicted) : 0.0);
  if (m.replica_memory.size() > 1) print_replica_memory(m.replica_memory);
  if (m.updated > 0 && m.update_ms > 0) {
    const double gbps = 28.0 * static_cast<double>(m.updated) / (m.update_ms / 1000.0) / 1e9;
    fmt::print("  optimizer update {}: {} parameters in {:.2f} ms = {:.1f} GB/s at 28 B each; memory bandwidth now (axpby) "
               "{:.1f} GB/s: {:.0f}% of it\n",
               m.update_place, m.updated, m.update_ms, gbps, m.reference_gbps, 100.0 * gbps / m.reference_gbps);
  }
  if (m.data_bytes > 0 || m.tensor_bytes > 0) print_sent(m);
  if (!m.stage_idle.empty()) print_stages(m);
  if (m.profile) fmt::print("{}", profile_table(*m.profile));
}

// The rate a point reports: tokens/s for a language model, else examples/s.
double rate_of(const Measured& m) { return m.images_per_sec * static_cast<double>(m.tokens_per_example); }

std::string rounds_text(const std::vector<double>& v) {
  std::string out;
  for (const double x : v) out += fmt::format(" {:.0f}", x);
  return out;
}

// --busy N: the point measured quiet and beside N load processes (BenchLoad), in turns, so
// that a machine that changes pace meanwhile slows both alike.
void quiet_and_busy(const BenchArgs& a) {
  const Recipe recipe = load_recipe(a.recipe, a.overrides);
  std::vector<std::string> load_args{"bench", a.recipe, "--steps", "1000000", "--warmup", "0"};
  for (const std::string& o : a.overrides) load_args.insert(load_args.end(), {"--set", o});
  BenchLoad load(a.busy, load_args);
  std::vector<double> quiet, busy;
  Measured last;
  int rank = 0;
  for (int64_t r = 0; r < a.rounds; ++r) {
    quiet.push_back(rate_of(measure_steps(recipe, a, rank)));
    load.start();
    last = measure_steps(recipe, a, rank);
    busy.push_back(rate_of(last));
    load.stop();
  }
  const double q = median_value(quiet), b = median_value(busy);
  const std::string unit = last.tokens_per_example > 1 ? "tokens/s" : "images/s";
  if (a.json) {
    fmt::print("{}\n", dump_line(Json{{"recipe", recipe.name}, {"unit", unit}, {"busy_processes", a.busy},
                                      {"threads", last.threads}, {"openmp_wait", openmp_wait_description()},
                                      {"quiet", q}, {"busy", b}, {"kept", b / q}, {"quiet_rounds", quiet}, {"busy_rounds", busy}}));
    return;
  }
  fmt::print("{}: {} thread(s), quiet and beside {} busy process(es) (each this recipe's bench), {} rounds in turns, "
             "{} timed steps after {} warm-up; OpenMP: {}\n",
             recipe.name, last.threads, a.busy, a.rounds, a.steps, a.warmup, openmp_wait_description());
  fmt::print("  quiet  {:>10.0f} {}   rounds:{}\n", q, unit, rounds_text(quiet));
  fmt::print("  busy   {:>10.0f} {}   rounds:{}   {:.0f}% of quiet (a fair share of {} core(s) among {} jobs: {:.0f}%)\n", b,
             unit, rounds_text(busy), 100 * b / q, cpu_cores(), a.busy + 1, 100.0 / (a.busy + 1));
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure training-step throughput; with --replicas, a scaling curve");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("recipe", a->recipe, "Recipe file (TOML)")->required();
  cmd->add_option("--set", a->overrides, "Override a recipe key (repeatable)");
  cmd->add_option("--strategy", a->strategy, "Strategy for the scaling curve (default: the recipe's)");
  cmd->add_option("--replicas", a->replicas, "Replica counts, e.g. 1,2,4 (one point each)");
  cmd->add_option("--mode", a->mode, "weak: per-replica batch fixed; strong: global batch fixed")
      ->check(CLI::IsMember({"weak", "strong"}))
      ->capture_default_str();
  cmd->add_option("--steps", a->steps, "Timed steps")->capture_default_str()->check(at_least(1));
  cmd->add_option("--warmup", a->warmup, "Untimed steps first")->capture_default_str()->check(at_least(0));
  cmd->add_option("--read-every", a->read_every,
                  "Read the steps' figures every N timed steps, each step of the N timed at their mean "
                  "(default: 16 on a GPU, which runs ahead of the host meanwhile, as in training; 1 on the CPU)")
      ->check(CLI::Range(int64_t{1}, StepLedger::kCapacity));
  cmd->add_flag("--json", a->json, "Print JSON: one object, or a list of points with --replicas");
  cmd->add_option("--csv", a->csv, "Write the scaling points as CSV");
  cmd->add_option("--svg", a->svg, "Draw images/s and efficiency against replicas");
  cmd->add_flag("--profile", a->profile, "Per-layer forward and backward time of one point's step (CPU devices)");
  cmd->add_option("--busy", a->busy, "Also measure beside N busy processes (this recipe's bench), quiet and busy in turns")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--rounds", a->rounds, "Measurements of each scaling point (in turns) or, with --busy, of quiet and busy; "
                  "medians reported")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100}));
  cmd->callback([a] {
    if (a->json) log::set_info_stream(stderr);
    DT_USER_CHECK(!a->profile || (a->replicas.empty() && a->strategy.empty() && a->csv.empty() && a->svg.empty()),
                  "bench --profile times one point: drop --strategy, --replicas, --csv and --svg "
                  "(choose the strategy with --set strategy.name=...)");
    DT_USER_CHECK(!a->busy || (a->replicas.empty() && a->strategy.empty() && !a->profile && launcher_size() <= 1),
                  "bench --busy measures one point in one process: drop --replicas, --strategy and --profile, and mpirun");
    if (a->busy) return quiet_and_busy(*a);
    if (!a->replicas.empty() || !a->strategy.empty() || !a->csv.empty() || !a->svg.empty()) {
      scaling(*a);
      return;
    }
    const Recipe recipe = load_recipe(a->recipe, a->overrides);
    int rank = 0;
    const Measured m = measure_steps(recipe, *a, rank);
    if (rank == 0) print_point(m, recipe.name, a->warmup, a->json);  // under mpirun, worker 0 reports
  });
}

}  // namespace distrain::cli
