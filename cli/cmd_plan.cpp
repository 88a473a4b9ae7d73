// distrain plan RECIPE --ranks N [--hosts H] [--device-memory SIZE] [--links ...]: every
// mesh and ZeRO layout of the recipe's model and global batch on N ranks, with each rank's
// predicted peak device memory (check's model) and step time (core/plan/plan_cost.hpp, from a
// profile measured here, or with --device-tflops from the layers' work on another device:
// core/plan/device_rate.hpp); the layouts that fit, fastest first, and why the first wins.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/commands.hpp"
#include "cli/plan_args.hpp"
#include "core/io/recipe_edit.hpp"
#include "core/plan/mesh_plan.hpp"
#include "core/train/bench_measure.hpp"
#include "core/plan/plan_cost.hpp"
#include "core/plan/plan_layouts.hpp"
#include "core/plan/plan_search.hpp"
#include "cli/plan_probe.hpp"
#include "core/backend/backend.hpp"
#include "core/base/error.hpp"
#include "core/base/host_memory.hpp"
#include "core/base/json.hpp"
#include "core/base/log.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/model/no_storage.hpp"

namespace distrain::cli {

namespace {

Json candidate_json(const Candidate& c, int64_t global_batch, double tokens_per_step) {
  const PlanLayout& l = c.layout;
  Json j{{"layout", l.str()},  {"data", l.data}, {"tensor", l.tensor}, {"pipeline", l.pipeline},
         {"micro_batches", l.micro_batches}, {"shard_optimizer", l.shard_optimizer},
         {"sequence_parallel", l.sequence_parallel}, {"recompute", l.recompute}, {"offload_optimizer", l.offload},
         {"zero_stage", l.zero_stage}, {"precision", l.bf16 ? "bf16" : "float32"},
         {"peak_bytes", c.peak}, {"fits", c.fits}, {"set", layout_overrides(l, global_batch)}};
  if (!c.refused.empty()) j["refused"] = c.refused;
  if (!c.fits) return j;
  j["step_ms"] = {{"total", c.step.total_ms()}, {"compute", c.step.compute_ms}, {"tensor", c.step.tensor_ms},
                  {"pipeline_messages", c.step.pipe_ms}, {"bubble", c.step.bubble_ms}, {"data", c.step.data_ms},
                  {"update", c.step.update_ms}, {"other", c.step.other_ms}};
  j["tokens_per_sec"] = tokens_per_step / c.step.total_ms() * 1e3;
  // Keyed as bench --json's sent_per_step, to hold one against the other: rank 0's along
  // the tensor axis; along the data axis a rank's with the most weights (rank 0's without
  // a pipeline).
  j["sent_per_step"] = {{"tensor_bytes", c.step.rank0_tensor_bytes},
                        {"tensor_collectives", c.step.rank0_tensor_collectives},
                        {"data_bytes", c.step.data_bytes}};
  return j;
}

// Two lines a layout, within 80 columns whatever its name: the rank and the layout, then
// its figures under the header's columns.
void print_table(const std::vector<Candidate>& all, int top, double tokens_per_step) {
  fmt::print("{:>3}  {:>10}{:>8}{:>8}{:>7}{:>6}{:>7}{:>6}{:>7}{:>6}{:>9}\n", "#", "peak/rank", "step ms", "compute", "tensor",
             "p2p", "bubble", "data", "update", "other", "tokens/s");
  int shown = 0;
  for (const Candidate& c : all) {
    if (!c.fits || shown == top) break;
    const StepEstimate& e = c.step;
    fmt::print("{:>3}  {}\n", ++shown, c.layout.str());
    fmt::print("     {:>10}{:>8.1f}{:>8.1f}{:>7.1f}{:>6.1f}{:>7.1f}{:>6.1f}{:>7.1f}{:>6.1f}{:>9.0f}\n", format_bytes(c.peak),
               e.total_ms(), e.compute_ms, e.tensor_ms, e.pipe_ms, e.bubble_ms, e.data_ms, e.update_ms, e.other_ms,
               tokens_per_step / e.total_ms() * 1e3);
  }
}

// What plan --measure's calibration found (calibrate_on_steps).
std::string calibration_line(const CoreSharing& cores, const Cluster& cluster) {
  return fmt::format("; {:.2f}x slower in a step of every rank{}, and a data axis {}waits {:.1f}% of the step's compute "
                     "(measured: calibration steps on every rank, against their predictions)",
                     cores.measured_slowdown,
                     cores.tensor_note(),
                     cluster.hosts > 1 ? "across hosts " : "", cores.data_wait_share * 100);
}

void print_plan(const Recipe& base, const PlanArgs& a, const Cluster& cluster, const Links& links, int64_t global_batch,
                const CoreSharing& cores, const std::vector<Candidate>& all) {
  const auto fitting = std::count_if(all.begin(), all.end(), [](const Candidate& c) { return c.fits; });
  const auto refused = std::count_if(all.begin(), all.end(), [](const Candidate& c) { return !c.refused.empty(); });
  fmt::print("{}", labelled_lines("plan", fmt::format(
      "{} on {} rank(s), {} host(s) of {}; global batch {}; {} layouts: {} fit{}, {} refused by the model", base.name,
      cluster.ranks, cluster.hosts, cluster.per_host(), global_batch, all.size(), fitting,
      base.strategy.device_memory ? fmt::format(" within strategy.device_memory = {}", format_bytes(base.strategy.device_memory)) : "",
      refused)));
  fmt::print("{}", labelled_lines("links", links.str() + (a.measure ? " (measured by --measure)" : "")));
  fmt::print("{}", labelled_lines("compute", a.rate.given()
      ? fmt::format("priced from each layer's work on a device of {} (the longer of its operations and its bytes); "
                    "offloading not weighed (its host's update is not priced)", a.rate.str())
      : fmt::format("measured here on one device with {} thread(s) per rank: {} core(s) per host for its {} rank(s){}",
                    threads_per_rank(a, cluster), a.cores, cluster.per_host(),
                    cores.measured_slowdown > 0 ? calibration_line(cores, cluster) : "")));
  if (fitting == 0) return;
  print_table(all, a.top, static_cast<double>(global_batch) * tokens_per_example(base));
  fmt::print("{}", labelled_lines("choice", fmt::format("{}: {}", all.front().layout.str(), reason(all, all.front(), cluster, links))));
}

// The precisions weighed (train.precision is bf16 or not): --precision's, else the recipe's.
std::vector<bool> precisions(const Recipe& base, const std::string& choice, bool profiled) {
  const std::vector<bool> chosen = choice.empty() ? std::vector<bool>{base.train.matmul_dtype == DType::bf16}
                                   : choice == "float32" ? std::vector<bool>{false}
                                   : choice == "bf16"    ? std::vector<bool>{true}
                                                         : std::vector<bool>{false, true};
  if (chosen.back() && profiled) {  // its products are profiled here
    if (const std::string how = backend_for(Device{}).bf16_matmul_emulated(); !how.empty())
      log::info("plan: bf16 layouts are timed on this machine, where {}", how);
  }
  return chosen;
}

// plan --write: the user's recipe with the chosen layout's keys changed (its comments, order
// and numbers kept), or where the change is not an edit of keys, the whole resolved recipe.
void write_layout_recipe(const PlanArgs& a, const Recipe& chosen, const PlanLayout& layout) {
  std::ifstream in(a.recipe);
  std::stringstream text;
  text << in.rdbuf();
  const bool model_set = std::any_of(a.overrides.begin(), a.overrides.end(), [](const std::string& o) { return o.starts_with("model."); });
  const std::optional<std::string> edited = edit_layout_text(text.str(), *chosen.table, model_set);
  std::ofstream out(a.write);
  out << "# distrain plan " << a.recipe << " --ranks " << a.ranks << " --hosts " << a.hosts << ": " << layout.str() << "\n"
      << (edited ? *edited : chosen.resolved_text() + "\n");
  DT_USER_CHECK(out.good(), "plan --write {}: could not write the file", a.write);
}

// Weighs every layout, prints them (or their JSON) and writes the chosen recipe.
void plan_and_print(const PlanArgs& a, const Recipe& base, const Cluster& cluster, const Links& links,
                    int64_t global_batch, const std::vector<bool>& weighed, const CoreSharing& cores) {
  std::vector<Candidate> all = weigh_memory(base, cluster, global_batch, weighed);
  if (a.rate.given())  // an offloaded update runs on another device's host, whose rates are not given
    std::erase_if(all, [](const Candidate& c) { return c.layout.offload; });
  weigh_time(base, cluster, links, global_batch, profiles_in_rounds(base, a, cluster, global_batch, all), cores, all);
  const double tokens_per_step = static_cast<double>(global_batch) * tokens_per_example(base);
  if (a.json) {
    Json list = Json::array();
    for (const Candidate& c : all) list.push_back(candidate_json(c, global_batch, tokens_per_step));
    fmt::print("{}\n", list.dump(2));
  } else {
    print_plan(base, a, cluster, links, global_batch, cores, all);
  }
  // Printed first, so that the peaks say by how much each layout is over.
  DT_USER_CHECK(!all.empty() && all.front().fits, "plan{}: no layout fits; raise --device-memory or add ranks{}",
                a.write.empty() ? "" : " --write " + a.write,
                a.rate.given() ? " (offloading is not weighed with --device-tflops)" : "");
  if (a.write.empty()) return;
  write_layout_recipe(a, layout_recipe(base, all.front().layout, global_batch), all.front().layout);
  if (!a.json) fmt::print("written     {} (launch: mpirun -np {} distrain train {})\n", a.write, a.ranks, a.write);
}

void run_plan(const PlanArgs& a) {
  std::vector<std::string> overrides = a.overrides;
  if (!a.device_memory.empty()) overrides.push_back("strategy.device_memory=" + toml_quoted(a.device_memory));
  const Recipe base = load_recipe(a.recipe, overrides);
  DT_USER_CHECK(a.ranks >= 1 && a.hosts >= 1 && a.ranks % a.hosts == 0,
                "plan: --ranks {} must be a multiple of --hosts {} (the same ranks on every host)", a.ranks, a.hosts);
  const Cluster cluster{a.ranks, a.hosts};
  Links links = a.links.empty() ? Links{} : parse_links(a.links);
  const int64_t global_batch = recipe_global_batch(base, a.ranks);
  const std::vector<bool> weighed = precisions(base, a.precision, !a.rate.given());
  // Devices priced from their rates are whole devices, not ranks sharing this host's cores.
  const CoreSharing sharing{a.rate.given() ? 1.0 : ranks_per_core(a, cluster)};
  if (!a.measure) return plan_and_print(a, base, cluster, links, global_batch, weighed, sharing);
  MpiCommunicator world(60.0);
  {
    const Model shapes(base.model(), backend_for(Device{}), storage_free_seams());
    links = measure_links(world, cluster, links, model_value_bytes(base, global_batch),  // collectives of the gradients' size
                          largest_stage_message_bytes(shapes, std::max<int64_t>(1, global_batch / a.ranks)),
                          layers_with_weights(shapes));
  }
  world.set_timeout(0);  // the profiles may take minutes
  const CoreSharing cores = calibrate(world, a, base, cluster, links, global_batch, weighed.front());
  // Rank 0 profiles and prints while the others wait asleep in a barrier, not spinning in
  // MPI's finalize on the cores it profiles on.
  if (world.rank() == 0) plan_and_print(a, base, cluster, links, global_batch, weighed, cores);
  world.barrier();
}

}  // namespace

void register_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Choose the layout for a cluster: every mesh layout's memory and step time");
  auto a = std::make_shared<PlanArgs>();
  a->cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cmd->add_option("recipe", a->recipe, "Recipe file (TOML)")->required();
  cmd->add_option("--ranks", a->ranks, "Ranks (one device each)")->required()->check(at_least(1));
  cmd->add_option("--hosts", a->hosts, "Hosts the ranks are spread over, the same number on each")->check(at_least(1));
  cmd->add_option("--device-memory", a->device_memory, "Each device's memory, e.g. 16GiB (default: strategy.device_memory)");
  cmd->add_option("--links", a->links, "Link bandwidths, e.g. intra=10GB/s,inter=10Gbit/s (the defaults)");
  cmd->add_option("--cores", a->cores, "Cores the ranks of one host share (default: this machine's)")->check(at_least(1));
  cmd->add_option("--top", a->top, "Layouts shown (default 10)")->check(at_least(1));
  cmd->add_option("--profile-steps", a->profile_steps, "Timed steps of each profile (default 5)")->check(at_least(1));
  cmd->add_option("--profile-rounds", a->profile_rounds, "Profiles of each micro-batch size, taken in turn and averaged "
                  "(default 3)")->check(at_least(1));
  cmd->add_option("--precision", a->precision, "Precisions weighed: float32, bf16 or both (default: train.precision)")
      ->check(CLI::IsMember({"float32", "bf16", "both"}));
  cmd->add_option("--set", a->overrides, "Override a recipe key (repeatable)");
  cmd->add_option("--write", a->write, "Write the fastest layout's recipe to this file");
  cmd->add_flag("--json", a->json, "Print every layout as JSON");
  cmd->add_flag("--measure", a->measure, "Measure the links: run under mpirun -np RANKS on the cluster itself");
  cmd->add_option("--device-tflops", a->device_tflops, "Price each layer on a device of this many TFLOP/s (its dense "
                  "products in the precision weighed) instead of profiling here; needs --device-bandwidth");
  cmd->add_option("--device-bandwidth", a->device_bandwidth, "That device's memory bandwidth, e.g. 3.35TB/s");
  cmd->callback([a, cmd] {
    if (a->json) log::set_info_stream(stderr);
    const bool tflops_given = cmd->count("--device-tflops") > 0;
    if (tflops_given || !a->device_bandwidth.empty()) {
      DT_USER_CHECK(tflops_given, "--device-bandwidth needs --device-tflops too (the device's rate of dense products)");
      DT_USER_CHECK(!a->measure, "plan: --measure times steps on this cluster's own devices; --device-tflops prices "
                    "other devices: give one or the other");
      DT_USER_CHECK(a->precision != "both", "plan: --device-tflops is one precision's rate of products: weigh float32 "
                    "and bf16 apart (--precision float32, then bf16, each with its rate)");
      a->rate = parse_device_rate(a->device_tflops, a->device_bandwidth);
    }
    run_plan(*a);
  });
}

}  // namespace distrain::cli
