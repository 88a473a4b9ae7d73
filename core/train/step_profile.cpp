#include "core/train/step_profile.hpp"

#include <algorithm>
#include <array>

#include "core/io/strategy_kind.hpp"

namespace distrain {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The step's time not in a layer's call, the reduction or the update.
double other_ms(const StepTime& t) {
  double covered = t.reduce_ms + t.update_ms;
  for (size_t i = 0; i < t.layers.forward.size(); ++i) covered += t.layers.forward[i] + t.layers.backward[i];
  return std::max(0.0, t.ms - covered);  // the parts lie inside the step: below 0 only by rounding
}

// The median over the timed steps of one figure of each step.
template <class Figure>
double median_of(const std::vector<StepTime>& times, int64_t warmup, Figure figure) {
  std::vector<double> v;
  for (size_t i = static_cast<size_t>(warmup); i < times.size(); ++i) v.push_back(figure(times[i]));
  return median(std::move(v));
}

ProfileRow layer_row(const Layer& layer, size_t i, const std::vector<StepTime>& times, int64_t warmup) {
  return ProfileRow{layer.name(), layer.type(),
                    median_of(times, warmup, [i](const StepTime& t) { return t.layers.forward.at(i); }),
                    median_of(times, warmup, [i](const StepTime& t) { return t.layers.backward.at(i); })};
}

}  // namespace

std::string why_not_profiled(const Strategy& strategy) {
  const StrategyKind* kind = find_strategy_kind(strategy.name());
  if (kind && kind->profiled()) return "";
  return fmt::format(
      "strategy {} is not profiled: its collectives run inside the layers' passes or its update on other ranks "
      "(--profile covers {})",
      strategy.name(), strategy_names_where([](const StrategyKind& k) { return k.profiled(); }));
}

StepProfile profile_steps(Strategy& strategy, const std::vector<StepTime>& times, int64_t warmup) {
  StepProfile p;
  p.strategy = strategy.name();
  p.steps = std::max<int64_t>(0, static_cast<int64_t>(times.size()) - warmup);
  p.step_ms = median_of(times, warmup, [](const StepTime& t) { return t.ms; });
  p.not_profiled = why_not_profiled(strategy);
  if (!p.not_profiled.empty()) return p;
  const auto& layers = strategy.model().layers();
  for (size_t i = 0; i < layers.size(); ++i) p.rows.push_back(layer_row(*layers[i], i, times, warmup));
  p.rows.push_back({"(update)", "", 0, median_of(times, warmup, [](const StepTime& t) { return t.update_ms; })});
  p.rows.push_back({"(reduction)", "", 0, median_of(times, warmup, [](const StepTime& t) { return t.reduce_ms; })});
  p.rows.push_back({"(other)", "", 0, median_of(times, warmup, other_ms)});
  double sum = 0;
  for (const ProfileRow& r : p.rows) sum += r.forward_ms + r.backward_ms;
  for (ProfileRow& r : p.rows) r.share = sum > 0 ? (r.forward_ms + r.backward_ms) / sum : 0;
  return p;
}

std::string profile_table(const StepProfile& p) {
  if (!p.not_profiled.empty()) return fmt::format("  profile: {}\n", p.not_profiled);
  std::string s = fmt::format("  profile of this process's first replica ({}), median of {} timed steps; step median {:.3f} ms\n",
                              p.strategy, p.steps, p.step_ms);
  size_t width = 22;  // the name column: as wide as the longest name
  for (const ProfileRow& r : p.rows) width = std::max(width, r.name.size());
  s += fmt::format("  {:<{}} {:<18} {:>11} {:>12} {:>7}\n", "layer", width, "type", "forward ms", "backward ms", "share");
  for (const ProfileRow& r : p.rows) {
    const std::string forward = r.type.empty() ? "" : fmt::format("{:.3f}", r.forward_ms);  // not a layer: one figure
    s += fmt::format("  {:<{}} {:<18} {:>11} {:>12.3f} {:>6.1f}%\n", r.name, width, r.type, forward, r.backward_ms,
                     100 * r.share);
  }
  return s;
}

Json profile_json(const StepProfile& p) {
  Json rows = Json::array();
  for (const ProfileRow& r : p.rows)
    rows.push_back({{"name", r.name},
                    {"type", r.type},
                    {"forward_ms", r.forward_ms},
                    {"backward_ms", r.backward_ms},
                    {"share", r.share}});
  return rows;
}

}  // namespace distrain
