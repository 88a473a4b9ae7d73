// bench --replicas: the scaling curve, one point per replica count measured in turns,
// as a table, JSON, CSV and SVG.
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "cli/bench_args.hpp"
#include "cli/commands.hpp"
#include "cli/scaling_chart.hpp"
#include "core/backend/backend.hpp"
#include "core/base/error.hpp"
#include "core/io/strategy_kind.hpp"

namespace distrain::cli {

namespace {

std::vector<int> parse_counts(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    DT_USER_CHECK(!item.empty() && *end == 0 && v > 0 && v <= 1024, "--replicas: '{}' is not a positive count (e.g. 1,2,4)", item);
    out.push_back(static_cast<int>(v));
  }
  DT_USER_CHECK(!out.empty(), "--replicas: give counts such as 1,2,4");
  return out;
}

// A point of n replicas is n processes under mpirun (else n devices of one process).
bool launched_per_replica(const StrategyKind& kind) { return kind.processes() == StrategyKind::Processes::launched; }

// The recipe of one point: the strategy, `n` replicas (devices) and their batch, under
// --mode strong a share of the first point's global batch.
std::vector<std::string> point_overrides(const BenchArgs& a, const std::string& name, int64_t base_batch, int first, int n) {
  std::vector<std::string> o = a.overrides;
  o.push_back("strategy.name=" + name);
  int64_t per_replica = base_batch;
  if (a.mode == "strong") {
    const int64_t global = base_batch * first;
    DT_USER_CHECK(global % n == 0, "--mode strong: global batch {} does not split over {} replicas", global, n);
    per_replica = global / n;
  }
  o.push_back(fmt::format("strategy.per_replica_batch={}", per_replica));
  const StrategyKind* kind = find_strategy_kind(name);
  DT_USER_CHECK(kind, "--strategy {}: no such strategy (one of {})", name, fmt::join(strategy_names(), ", "));
  if (launched_per_replica(*kind)) {
    o.push_back("strategy.devices=[\"cpu:0\"]");  // one replica per process, n processes
    return o;
  }
  DT_USER_CHECK(!kind->single_device() || n == 1, "--strategy {} has exactly 1 replica; use mirrored for more", name);
  std::string devices;
  for (int i = 0; i < n; ++i) devices += fmt::format("{}\"cpu:{}\"", i ? "," : "", i);
  o.push_back("strategy.devices=[" + devices + "]");
  return o;
}

// One point per replica count, each measured --rounds times with the points in turns (a
// machine that changes pace meanwhile moves every point alike): the median round, its range;
// speed-up and efficiency against the first.
std::vector<ScalingPoint> scaling_points(const BenchArgs& a, const std::string& name, int64_t base_batch,
                                         const std::vector<int>& counts) {
  std::vector<std::vector<Measured>> rounds(counts.size());
  for (int64_t r = 0; r < a.rounds; ++r)
    for (size_t i = 0; i < counts.size(); ++i) {
      const int n = counts[i];
      const std::vector<std::string> o = point_overrides(a, name, base_batch, counts.front(), n);
      int rank = 0;
      rounds[i].push_back(launched_per_replica(*find_strategy_kind(name)) ? measure_with_mpirun(a, o, n)
                                                          : measure_steps(load_recipe(a.recipe, o), a, rank));
    }
  std::vector<ScalingPoint> points;
  for (size_t i = 0; i < counts.size(); ++i) {
    std::vector<Measured>& ms = rounds[i];
    std::sort(ms.begin(), ms.end(), [](const Measured& x, const Measured& y) { return x.images_per_sec < y.images_per_sec; });
    const Measured& m = ms[(ms.size() - 1) / 2];
    ScalingPoint p{counts[i], m.global_batch, m.images_per_sec, 0, 0, m.median_ms, m.comm_share};
    p.min_images_per_sec = ms.front().images_per_sec;
    p.max_images_per_sec = ms.back().images_per_sec;
    p.rounds = static_cast<int>(ms.size());
    points.push_back(p);
  }
  compare_to_first(points);
  return points;
}

void print_scaling_json(const std::vector<ScalingPoint>& points, const std::string& name, const std::string& mode) {
  Json list = Json::array();
  for (const auto& p : points)
    list.push_back({{"strategy", name},
                    {"mode", mode},
                    {"replicas", p.replicas},
                    {"global_batch", p.global_batch},
                    {"images_per_sec", p.images_per_sec},
                    {"speedup", p.speedup},
                    {"efficiency", p.efficiency},
                    {"step_ms", p.step_ms},
                    {"comm_share", p.comm_share},
                    {"rounds", p.rounds},
                    {"min_images_per_sec", p.min_images_per_sec},
                    {"max_images_per_sec", p.max_images_per_sec},
                    {"within_noise", p.within_noise}});
  fmt::print("{}\n", dump_line(list));
}

void print_scaling_table(const std::vector<ScalingPoint>& points, const BenchArgs& a, const std::string& recipe_name,
                         const std::string& name) {
  fmt::print("{} scaling of {} ({}), {} timed steps after {} warm-up, {} CPU threads in all; each point the median of {} "
             "round(s), the points in turns\n",
             a.mode, recipe_name, name, a.steps, a.warmup, cpu_threads(), a.rounds);
  fmt::print("{:>8} {:>12} {:>12} {:>8} {:>9} {:>11} {:>10} {:>7}\n", "replicas", "global batch", "images/s", "spread",
             "speed-up", "efficiency", "step ms", "comm");
  bool noisy = false;
  for (const auto& p : points) {
    noisy = noisy || p.within_noise;
    fmt::print("{:>8} {:>12} {:>12.0f} {:>7.1f}% {:>8.2f}x {:>10.1f}%{} {:>9.2f} {:>6.1f}%\n", p.replicas, p.global_batch,
               p.images_per_sec, 100 * p.spread(), p.speedup, 100 * p.efficiency, p.within_noise ? "~" : " ", p.step_ms,
               100 * p.comm_share);
  }
  if (noisy)
    fmt::print("~: the efficiency's distance from 100% is smaller than the spread of the rounds (this point's and the first's): "
               "not told apart from perfect scaling; more --rounds or --steps, or a quieter machine, may\n");
}

void write_scaling_csv(const std::string& path, const std::vector<ScalingPoint>& points, const std::string& name,
                       const std::string& mode) {
  std::ofstream f(path);
  DT_USER_CHECK(f, "--csv {}: cannot write", path);
  f << "strategy,mode,replicas,global_batch,images_per_sec,speedup,efficiency,step_ms,comm_share,rounds,min_images_per_sec,"
       "max_images_per_sec,within_noise\n";
  for (const auto& p : points)
    f << fmt::format("{},{},{},{},{:.1f},{:.4f},{:.4f},{:.3f},{:.4f},{},{:.1f},{:.1f},{}\n", name, mode, p.replicas, p.global_batch,
                     p.images_per_sec, p.speedup, p.efficiency, p.step_ms, p.comm_share, p.rounds, p.min_images_per_sec,
                     p.max_images_per_sec, p.within_noise);
}

void write_scaling_svg(const std::string& path, const std::vector<ScalingPoint>& points, const std::string& title) {
  std::ofstream f(path);
  DT_USER_CHECK(f, "--svg {}: cannot write", path);
  f << scaling_svg(title, points);
}

}  // namespace

void scaling(const BenchArgs& a) {
  const Recipe base = load_recipe(a.recipe, a.overrides);
  const std::string name = a.strategy.empty() ? base.strategy.name : a.strategy;
  const std::vector<int> counts = parse_counts(a.replicas.empty() ? "1" : a.replicas);
  const std::vector<ScalingPoint> points = scaling_points(a, name, base.strategy.per_replica_batch, counts);
  if (a.json)
    print_scaling_json(points, name, a.mode);
  else
    print_scaling_table(points, a, base.name, name);
  if (!a.csv.empty()) write_scaling_csv(a.csv, points, name, a.mode);
  if (!a.svg.empty()) write_scaling_svg(a.svg, points, fmt::format("{}: {} scaling, {}", base.name, a.mode, name));
}

}  // namespace distrain::cli
