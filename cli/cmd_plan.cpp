// distrain plan RECIPE --ranks N [--hosts H] [--device-memory SIZE] [--links ...]: every
// mesh and ZeRO layout of the recipe's model and global batch on N ranks, with each rank's
// predicted peak device memory (check's model) and step time (cli/plan_cost.hpp, from a
// profile measured here); the layouts that fit, fastest first, and why the first wins.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "cli/commands.hpp"
#include "cli/mesh_plan.hpp"
#include "cli/bench_steps.hpp"
#include "cli/plan_cost.hpp"
#include "cli/plan_layouts.hpp"
#include "cli/plan_probe.hpp"
#include "core/backend/backend.hpp"
#include "core/base/error.hpp"
#include "core/base/host_memory.hpp"
#include "core/base/json.hpp"
#include "core/base/log.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/model/no_storage.hpp"
#include "core/strategy/zero_memory.hpp"

namespace distrain::cli {

namespace {

struct PlanArgs {
  std::string recipe, links, device_memory, write, precision;
  std::vector<std::string> overrides;
  int ranks = 0, hosts = 1, cores = 0, top = 10;
  int64_t profile_steps = 5, profile_rounds = 3;
  bool json = false, measure = false;
};

struct Candidate {
  PlanLayout layout;
  int64_t peak = 0;        // the largest rank's predicted device bytes
  int64_t values = 0;      // the most bytes of trainable values a rank holds
  std::string refused;     // why the model cannot take the layout; "" when it can
  bool fits = false;       // within the budget (a refused layout does not fit)
  StepEstimate step;
};

// Bytes of the whole model's trainable values (one rank's, data parallel).
int64_t model_value_bytes(const Recipe& base, int64_t global_batch) {
  return mesh_rank_bytes(layout_recipe(base, PlanLayout{}, global_batch)).at(0).values;
}

// A layout's largest predicted device total and trainable values of a rank (check's model).
RankBytes largest_rank(const Recipe& r, const PlanLayout& l) {
  if (l.zero_stage > 0) {
    const MemoryUse m = zero_memory_per_replica(r, l.data);
    return RankBytes{m.parameters, m.gradients, m.optimizer, m.activations, m.offloaded,
                     model_value_bytes(r, r.strategy.per_replica_batch)};
  }
  RankBytes largest;
  for (const RankBytes& b : mesh_rank_bytes(r)) {
    const int64_t values = std::max(largest.values, b.values);
    if (b.total() > largest.total()) largest = b;
    largest.values = values;
  }
  return largest;
}

// Each layout's memory; refused layouts keep the model's reason.
std::vector<Candidate> weigh_memory(const Recipe& base, const Cluster& cluster, int64_t global_batch,
                                    const std::vector<bool>& precisions) {
  std::vector<Candidate> out;
  const ModelSpec& spec = base.model();
  for (const PlanLayout& l : enumerate_layouts(cluster, global_batch, spec.blocks, spec.layers.size(), precisions)) {
    Candidate c{l};
    try {
      const RankBytes b = largest_rank(layout_recipe(base, l, global_batch), l);
      c.peak = b.total();
      c.values = b.values;
      c.fits = base.strategy.device_memory == 0 || c.peak <= base.strategy.device_memory;
    } catch (const UserError& e) {
      c.refused = e.what();
    }
    out.push_back(std::move(c));
  }
  return out;
}

// Accumulation only trades time for memory: a layout keeps it where the same layout with
// fewer micro-batches does not fit.
void drop_needless_accumulation(std::vector<Candidate>& all) {
  const auto fits_with_fewer = [&](const Candidate& c) {
    return c.layout.accumulates() && std::any_of(all.begin(), all.end(), [&](const Candidate& o) {
             PlanLayout fewer = c.layout;
             fewer.micro_batches = o.layout.micro_batches;
             return o.fits && o.layout.micro_batches < c.layout.micro_batches && o.layout == fewer;
           });
  };
  std::vector<Candidate> kept;
  for (const Candidate& c : all)
    if (!fits_with_fewer(c)) kept.push_back(c);
  all = std::move(kept);
}

// The profile of `base` cut to its first blocks (profile_recipe), each layer of the whole
// model timed as its stand-in; the update and the rest of the step (zeroing gradients and
// checking them dominate it in a large model) scaled from the profiled model's values to
// the whole one's.
LayerTimes layer_times(const Recipe& base, int64_t batch, bool bf16, int64_t steps, int threads, int64_t value_bytes) {
  const Recipe profiled = profile_recipe(base, batch, bf16, threads);
  const StepProfile p = profile_on_one_device(profiled, steps, 2);
  const double scale = static_cast<double>(value_bytes) / static_cast<double>(model_value_bytes(profiled, batch));
  std::map<std::string, std::pair<double, double>> measured;
  LayerTimes t;
  t.value_bytes = value_bytes;
  for (const ProfileRow& r : p.rows) {
    if (r.name == "(update)") t.update_ms = r.backward_ms * scale;
    else if (r.name == "(other)" || r.name == "(reduction)") t.step_ms += r.backward_ms * scale;  // loss, zeroing, checks
    else measured[r.name] = {r.forward_ms, r.backward_ms};
  }
  for (const LayerSpec& layer : base.model().layers) {
    const std::string& name = layer.prototype->name();
    const std::string stand_in = profiled_stand_in(name, [&](const std::string& n) { return measured.count(n) > 0; });
    if (!stand_in.empty()) t.layer_ms[name] = measured.at(stand_in);
  }
  return t;
}

// A host's cores are split among its ranks; with fewer cores than ranks they take turns.
int threads_per_rank(const PlanArgs& a, const Cluster& cluster) { return std::max(1, a.cores / cluster.per_host()); }
double ranks_per_core(const PlanArgs& a, const Cluster& cluster) {
  return std::max(1.0, static_cast<double>(cluster.per_host()) / a.cores);
}

// One profile per micro-batch size and precision, taken in rounds that visit every size in
// turn: a shared machine's speed changes from one minute to the next (this 2-core VM's
// single-thread step swung 1.6x within seconds), and rounds spread over the whole
// measurement give every size the same mix of fast and slow spells.
std::map<std::pair<int64_t, bool>, LayerTimes> profiles_in_rounds(const Recipe& base, const PlanArgs& a,
                                                                 const Cluster& cluster, int64_t global_batch,
                                                                 const std::vector<Candidate>& candidates) {
  std::map<std::pair<int64_t, bool>, std::vector<LayerTimes>> rounds;
  for (const Candidate& c : candidates)
    if (c.fits) rounds[{global_batch / c.layout.data / c.layout.micro_batches, c.layout.bf16}];
  const int64_t value_bytes = model_value_bytes(base, global_batch);
  for (int64_t r = 0; r < a.profile_rounds; ++r)
    for (auto& [key, taken] : rounds)
      taken.push_back(layer_times(base, key.first, key.second, a.profile_steps, threads_per_rank(a, cluster), value_bytes));
  std::map<std::pair<int64_t, bool>, LayerTimes> profiles;
  for (const auto& [key, taken] : rounds) profiles.emplace(key, mean_of(taken));
  return profiles;
}

// Step times for the layouts that fit, from one profile per micro-batch size and precision.
void weigh_time(const Recipe& base, const PlanArgs& a, const Cluster& cluster, const Links& links, int64_t global_batch,
                const CoreSharing& cores, std::vector<Candidate>& candidates) {
  const auto profiles = profiles_in_rounds(base, a, cluster, global_batch, candidates);
  for (Candidate& c : candidates) {
    if (!c.fits) continue;
    const Recipe r = layout_recipe(base, c.layout, global_batch);
    const int64_t micro = global_batch / c.layout.data / c.layout.micro_batches;
    c.step = estimate_step(r, c.layout, cluster, links, profiles.at({micro, c.layout.bf16}), c.values, cores);
  }
  // Fastest first; within 2% of each other (below the model's accuracy) the simpler layout.
  const auto key = [](const Candidate& c) {
    return std::tuple(!c.fits, c.fits ? std::round(std::log(c.step.total_ms()) / std::log(1.02)) : 0.0, c.layout.options(),
                      c.fits ? c.step.total_ms() : static_cast<double>(c.peak));
  };
  std::stable_sort(candidates.begin(), candidates.end(), [&](const Candidate& x, const Candidate& y) { return key(x) < key(y); });
}

double tokens_per_example(const Recipe& recipe) {
  return recipe.model().input_dtype == DType::i32 ? static_cast<double>(recipe.model().input_shape.numel()) : 1.0;
}

// Why the chosen layout's tensor axis is where it is: layouts keep it inside a host, off the
// hosts' link, which measured links may show no slower.
std::string tensor_reason(const Cluster& cluster, const Links& links) {
  if (cluster.hosts == 1) return "tensor parallelism splits each layer's work over the ranks";
  const double slower = links.intra_bytes_per_s / links.inter_bytes_per_s;
  return slower >= 1.5 ? fmt::format("tensor parallelism stays inside a host (the inter-host link is {:.0f}x slower than "
                                     "the intra-host one)", slower)
                       : fmt::format("tensor parallelism stays inside a host, where its collectives at every layer "
                                     "cross no host's link (here {:.3g} GB/s, the inter-host link {:.3g} GB/s)",
                                     links.intra_bytes_per_s / 1e9, links.inter_bytes_per_s / 1e9);
}

// Why the fastest layout wins, in the decision guide's terms.
std::string reason(const std::vector<Candidate>& all, const Candidate& best, const Cluster& cluster, const Links& links) {
  std::vector<std::string> why;
  const auto plain = std::find_if(all.begin(), all.end(), [](const Candidate& c) {
    const PlanLayout& l = c.layout;
    return l.tensor == 1 && l.pipeline == 1 && !l.shard_optimizer && l.zero_stage == 0 && !l.offload && !l.recompute &&
           !l.accumulates() && c.refused.empty();
  });
  if (plain != all.end())
    why.push_back(plain->fits ? "the model fits one device"
                              : fmt::format("the model does not fit one device ({} predicted per rank without sharding)",
                                            format_bytes(plain->peak)));
  const PlanLayout& l = best.layout;
  if (l.tensor == 1 && l.pipeline == 1) why.push_back("data parallelism alone is the fastest layout that fits");
  if (l.tensor > 1) why.push_back(tensor_reason(cluster, links));
  if (l.pipeline > 1) why.push_back(fmt::format("{} pipeline stages send only activations between them", l.pipeline));
  if (l.shard_optimizer) why.push_back("the optimizer state is sharded over the data ranks (ZeRO-1)");
  if (l.zero_stage == 2) why.push_back("the optimizer state and gradients are sharded over the data ranks (ZeRO-2)");
  if (l.zero_stage == 3) why.push_back("the optimizer state, gradients and weights are sharded over the data ranks (ZeRO-3)");
  if (l.accumulates())
    why.push_back(fmt::format("each data rank's batch runs as {} micro-batches whose gradients accumulate (the layout "
                              "does not fit with fewer)", l.micro_batches));
  if (l.recompute) why.push_back("block activations are recomputed");
  if (l.offload) why.push_back("the optimizer state lives in host memory");
  if (l.bf16) why.push_back("matrix products take bf16 operands and layer outputs are kept in bf16 (weights and optimizer "
                            "state stay float32)");
  return fmt::format("{}", fmt::join(why, "; "));
}

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

// The layout column is as wide as the longest layout shown, so the figures stay aligned.
void print_table(const std::vector<Candidate>& all, int top, double tokens_per_step) {
  size_t width = std::string("layout").size();
  for (int shown = 0; const Candidate& c : all) {
    if (!c.fits || shown++ == top) break;
    width = std::max(width, c.layout.str().size());
  }
  fmt::print("{:>3}  {:<{}} {:>10} {:>9} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>10}\n", "#", "layout", width, "peak/rank",
             "step ms", "compute", "tensor", "p2p", "bubble", "data", "update", "other", "tokens/s");
  int shown = 0;
  for (const Candidate& c : all) {
    if (!c.fits || shown == top) break;
    const StepEstimate& e = c.step;
    fmt::print("{:>3}  {:<{}} {:>10} {:>9.1f} {:>8.1f} {:>7.1f} {:>7.1f} {:>7.1f} {:>7.1f} {:>7.1f} {:>7.1f} {:>10.0f}\n",
               ++shown, c.layout.str(), width, format_bytes(c.peak), e.total_ms(), e.compute_ms, e.tensor_ms, e.pipe_ms,
               e.bubble_ms, e.data_ms, e.update_ms, e.other_ms, tokens_per_step / e.total_ms() * 1e3);
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
  fmt::print("plan        {} on {} rank(s), {} host(s) of {}; global batch {}; {} layouts: {} fit{}, {} refused by the model\n",
             base.name, cluster.ranks, cluster.hosts, cluster.per_host(), global_batch, all.size(), fitting,
             base.strategy.device_memory ? fmt::format(" within strategy.device_memory = {}", format_bytes(base.strategy.device_memory)) : "",
             refused);
  fmt::print("links       {}{}\n", links.str(), a.measure ? " (measured by --measure)" : "");
  fmt::print("compute     measured here on one device with {} thread(s) per rank: {} core(s) per host for its {} rank(s){}\n",
             threads_per_rank(a, cluster), a.cores, cluster.per_host(),
             cores.measured_slowdown > 0 ? calibration_line(cores, cluster) : "");
  if (fitting == 0) return;
  print_table(all, a.top, static_cast<double>(global_batch) * tokens_per_example(base));
  fmt::print("choice      {}: {}\n", all.front().layout.str(), reason(all, all.front(), cluster, links));
}

// The precisions weighed (train.precision is bf16 or not): --precision's, else the recipe's.
std::vector<bool> precisions(const Recipe& base, const std::string& choice) {
  const std::vector<bool> chosen = choice.empty() ? std::vector<bool>{base.train.matmul_dtype == DType::bf16}
                                   : choice == "float32" ? std::vector<bool>{false}
                                   : choice == "bf16"    ? std::vector<bool>{true}
                                                         : std::vector<bool>{false, true};
  if (chosen.back()) {  // its products are profiled here
    if (const std::string how = backend_for(Device{}).bf16_matmul_emulated(); !how.empty())
      log::info("plan: bf16 layouts are timed on this machine, where {}", how);
  }
  return chosen;
}

// Weighs every layout, prints them (or their JSON) and writes the chosen recipe.
void plan_and_print(const PlanArgs& a, const Recipe& base, const Cluster& cluster, const Links& links,
                    int64_t global_batch, const std::vector<bool>& weighed, const CoreSharing& cores) {
  std::vector<Candidate> all = weigh_memory(base, cluster, global_batch, weighed);
  drop_needless_accumulation(all);
  weigh_time(base, a, cluster, links, global_batch, cores, all);
  const double tokens_per_step = static_cast<double>(global_batch) * tokens_per_example(base);
  if (a.json) {
    Json list = Json::array();
    for (const Candidate& c : all) list.push_back(candidate_json(c, global_batch, tokens_per_step));
    fmt::print("{}\n", list.dump(2));
  } else {
    print_plan(base, a, cluster, links, global_batch, cores, all);
  }
  // Printed first, so that the peaks say by how much each layout is over.
  DT_USER_CHECK(!all.empty() && all.front().fits, "plan{}: no layout fits; raise --device-memory or add ranks",
                a.write.empty() ? "" : " --write " + a.write);
  if (a.write.empty()) return;
  std::ofstream out(a.write);
  out << "# distrain plan " << a.recipe << " --ranks " << a.ranks << " --hosts " << a.hosts << ": " << all.front().layout.str()
      << "\n" << layout_recipe(base, all.front().layout, global_batch).resolved_text() << "\n";
  DT_USER_CHECK(out.good(), "plan --write {}: could not write the file", a.write);
  if (!a.json) fmt::print("written     {} (launch: mpirun -np {} distrain train {})\n", a.write, a.ranks, a.write);
}

// `one_device` (at a data rank's batch) over every rank as `layout`, the step's global
// batch that batch per rank, so that each rank computes as many examples as in `data N`.
CalibrationStep calibration_step(const Recipe& one_device, int ranks, const PlanLayout& layout) {
  return {layout_recipe(one_device, layout, one_device.step_batch() * ranks), layout};
}

// The steps plan --measure calibrates on (CalibrationSteps): data N; pipeline N (as many
// micro-batches) where the model has a layer per rank; tensor T x pipeline N/T
// (N micro-batches, each of a rank's batch as profiled) where a host's T ranks can split
// the blocks: no data axis, whose wait data N sets.
CalibrationSteps calibration_steps(const Recipe& one_device, const Cluster& cluster, bool bf16) {
  const int n = cluster.ranks, t = cluster.per_host();
  PlanLayout data_n{n};
  data_n.bf16 = bf16;
  CalibrationSteps on{calibration_step(one_device, n, data_n)};
  if (n > 1 && one_device.model().layers.size() >= static_cast<size_t>(n)) {
    PlanLayout pipeline_n{1, 1, n, n};
    pipeline_n.bf16 = bf16;
    on.pipeline_n = calibration_step(one_device, n, pipeline_n);
  }
  if (t > 1) {
    PlanLayout tensor_t{1, t, n / t, n};
    tensor_t.bf16 = bf16;
    try {
      CalibrationStep step = calibration_step(one_device, n, tensor_t);
      mesh_rank_bytes(step.recipe);  // builds the ranks' models: refuses blocks that do not split over t
      on.tensor_t = std::move(step);
    } catch (const UserError& e) {
      log::info("plan --measure: no {} calibration step: {}", tensor_t.str(), e.what());
    }
  }
  return on;
}

// Whether every calibration step `on` (of the whole model) fits a rank of `base`:
// strategy.device_memory where given, else the host memory free for each of a host's
// ranks. Steps of the model's first blocks alone priced the whole model's layouts 10-35%
// off (docs/BENCHMARKS.md): their embedding, head and messages weigh more beside less work.
bool calibrates_whole_model(const Recipe& base, const Cluster& cluster, int64_t global_batch, const CalibrationSteps& on) {
  const int64_t budget = base.strategy.device_memory > 0
                             ? base.strategy.device_memory
                             : available_host_memory().value_or(INT64_MAX) / cluster.per_host();
  std::vector<PlanLayout> layouts{on.data_n.layout};
  for (const auto* step : {&on.pipeline_n, &on.tensor_t})
    if (*step) layouts.push_back((*step)->layout);
  for (const PlanLayout& l : layouts) {
    try {
      if (largest_rank(layout_recipe(base, l, global_batch), l).total() > budget) return false;
    } catch (const UserError&) {
      return false;
    }
  }
  return true;
}

// Ranks that share a core lose more inside a step than their turns (this VM: 4 ranks on 2
// cores took 2.0-2.1x one alone side by side, and a step priced so came out 10-30% low),
// and a data axis across hosts waits for the slower host: real steps on every rank
// calibrate both (calibrate_on_steps), of the whole model where they fit, else of its
// first blocks.
CoreSharing calibrate(MpiCommunicator& world, const PlanArgs& a, const Recipe& base, const Cluster& cluster,
                      const Links& links, int64_t global_batch, bool bf16) {
  const int64_t data_rank_batch = std::max<int64_t>(1, global_batch / a.ranks);
  const int threads = threads_per_rank(a, cluster);
  const Recipe whole = profile_recipe(base, data_rank_batch, bf16, threads, 0);
  CalibrationSteps on = calibration_steps(whole, cluster, bf16);
  const bool on_whole = calibrates_whole_model(base, cluster, global_batch, on);
  const Recipe calibrated = on_whole ? whole : profile_recipe(base, data_rank_batch, bf16, threads);
  if (!on_whole) on = calibration_steps(calibrated, cluster, bf16);
  if (world.rank() == 0)
    log::info("plan --measure: calibrating on steps of {}", on_whole ? "the whole model" : fmt::format(
        "its first {} blocks (the whole model's calibration steps do not fit a rank)", kProfiledBlocks));
  const int64_t calibrated_bytes = model_value_bytes(calibrated, data_rank_batch);
  const auto profile_alone = [&] {
    return layer_times(calibrated, data_rank_batch, bf16, a.profile_steps, threads, calibrated_bytes);
  };
  return calibrate_on_steps(world, cluster, links, on, ranks_per_core(a, cluster), profile_alone, a.profile_steps,
                            a.profile_rounds);
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
  const std::vector<bool> weighed = precisions(base, a.precision);
  if (!a.measure) return plan_and_print(a, base, cluster, links, global_batch, weighed, CoreSharing{ranks_per_core(a, cluster)});
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
  cmd->callback([a] {
    if (a->json) log::set_info_stream(stderr);
    run_plan(*a);
  });
}

}  // namespace distrain::cli
