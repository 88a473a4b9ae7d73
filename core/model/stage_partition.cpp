#include "core/model/stage_partition.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "core/base/error.hpp"

namespace distrain {

int StagePlan::stage_of(size_t layer) const {
  for (int s = stages() - 1; s >= 0; --s)
    if (layer >= first[static_cast<size_t>(s)]) return s;
  return 0;
}

ModelPart StagePlan::part(int stage) const {
  const auto s = static_cast<size_t>(stage);
  return ModelPart{first[s], first[s + 1], stage > 0};
}

std::vector<double> layer_costs(const Model& model) {
  std::map<std::string, double> weights;
  for (const Variable& v : model.params().variables())
    if (v.trainable) weights[v.layer] += static_cast<double>(v.shape.numel());
  std::vector<double> costs;
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& l = *model.layers()[i];
    const Shape& out = model.layer_shapes()[i];
    const double elements = static_cast<double>(out.numel());
    const double positions = elements / static_cast<double>(out[out.rank() - 1]);
    double w = weights.count(l.name()) ? weights[l.name()] : 0.0;
    if (const std::optional<int> tied = l.tied_variable())  // a head computing with the embedding's table
      w += static_cast<double>(model.params().variables().at(static_cast<size_t>(*tied)).shape.numel());
    costs.push_back(w > 0 ? 6.0 * w * positions : 3.0 * elements);
  }
  return costs;
}

namespace {

// Cuts minimising the largest stage's cost (exact, by dynamic programming over prefixes),
// only before layers where `cuttable` allows.
std::vector<size_t> balanced_cuts(const std::vector<double>& costs, const std::vector<bool>& cuttable, int stages) {
  const size_t n = costs.size(), p = static_cast<size_t>(stages);
  std::vector<double> prefix(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[k][i]: the least largest cost of the first i layers in k stages; from[k][i] its last cut.
  std::vector<std::vector<double>> best(p + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<size_t>> from(p + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0.0;
  for (size_t k = 1; k <= p; ++k)
    for (size_t i = k; i <= n; ++i)
      for (size_t j = k - 1; j < i; ++j) {
        if (!cuttable[j]) continue;
        const double c = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (c < best[k][i]) best[k][i] = c, from[k][i] = j;
      }
  std::vector<size_t> first(p + 1, n);
  for (size_t k = p, i = n; k > 0; --k) {
    first[k - 1] = from[k][i];
    i = from[k][i];
  }
  return first;
}

std::vector<size_t> named_cuts(const Model& model, int stages, const std::vector<std::string>& boundaries,
                               const std::string& file) {
  DT_USER_CHECK(static_cast<int>(boundaries.size()) == stages - 1,
                "{}: strategy.stage_boundaries names {} layer(s); {} stages need {} (the first layer of each stage after the first)",
                file, boundaries.size(), stages, stages - 1);
  std::vector<size_t> first{0};
  for (const std::string& name : boundaries) {
    const auto& layers = model.layers();
    const auto it = std::find_if(layers.begin(), layers.end(), [&](const auto& l) { return l->name() == name; });
    DT_USER_CHECK(it != layers.end(), "{}: strategy.stage_boundaries: no layer is named '{}'", file, name);
    const auto i = static_cast<size_t>(it - layers.begin());
    DT_USER_CHECK(i > first.back(), "{}: strategy.stage_boundaries: '{}' must come after the previous boundary and the first layer",
                  file, name);
    DT_USER_CHECK(model.can_cut_before(i), "{}: strategy.stage_boundaries: a stage cannot start at '{}': a layer from there "
                  "on reads an output from before the layer just before it (cut where a block starts)", file, name);
    first.push_back(i);
  }
  first.push_back(model.layers().size());
  return first;
}

}  // namespace

StagePlan plan_stages(const Model& model, int stages, const std::vector<std::string>& boundaries, const std::string& file) {
  const size_t n = model.layers().size();
  DT_USER_CHECK(static_cast<size_t>(stages) <= n, "{}: strategy.pipeline = {} stages for a model of {} layers; use at most {}",
                file, stages, n, n);
  const std::vector<double> costs = layer_costs(model);
  std::vector<bool> cuttable(n);
  size_t cuts = 0;
  for (size_t i = 0; i < n; ++i) cuts += (cuttable[i] = model.can_cut_before(i)) ? 1 : 0;
  DT_USER_CHECK(static_cast<size_t>(stages) <= cuts, "{}: strategy.pipeline = {} stages, but a stage can start at only {} "
                "of the model's layers (where nothing after reads past the layer before); use at most {}",
                file, stages, cuts, cuts);
  StagePlan plan;
  plan.first = boundaries.empty() ? balanced_cuts(costs, cuttable, stages) : named_cuts(model, stages, boundaries, file);
  for (int s = 0; s < stages; ++s) {
    double c = 0;
    for (size_t i = plan.first[static_cast<size_t>(s)]; i < plan.first[static_cast<size_t>(s) + 1]; ++i) c += costs[i];
    plan.cost.push_back(c);
  }
  return plan;
}

}  // namespace distrain
