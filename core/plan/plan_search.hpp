// The search `distrain plan` makes: every layout of a recipe on a cluster weighed for its
// largest rank's device memory (check's model: mesh_plan.hpp, zero_memory.hpp) and, where
// it fits, its step time (plan_cost.hpp, from the layers' measured times); ranked fastest
// first, with the reason the first wins.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/io/recipe.hpp"
#include "core/plan/mesh_plan.hpp"
#include "core/plan/plan_cost.hpp"
#include "core/plan/plan_layouts.hpp"

namespace distrain {

struct Candidate {
  PlanLayout layout;
  int64_t peak = 0;        // the largest rank's predicted device bytes
  int64_t values = 0;      // the most bytes of trainable values a rank holds
  std::string refused;     // why the model cannot take the layout; "" when it can
  bool fits = false;       // within the budget (a refused layout does not fit)
  StepEstimate step;
};

// Bytes of the whole model's trainable values (one rank's, data parallel).
int64_t model_value_bytes(const Recipe& base, int64_t global_batch);
// A layout's largest predicted device total and trainable values of a rank.
RankBytes largest_rank(const Recipe& r, const PlanLayout& l);
// Every layout's memory; refused layouts keep the model's reason. Accumulation only trades
// time for memory: a layout keeps it only where the same layout with fewer micro-batches
// does not fit.
std::vector<Candidate> weigh_memory(const Recipe& base, const Cluster& cluster, int64_t global_batch,
                                    const std::vector<bool>& precisions);

// The layers' times of one micro-batch size and precision, keyed so.
using LayerTimesBy = std::map<std::pair<int64_t, bool>, LayerTimes>;
// The micro-batch sizes and precisions whose profiles the fitting candidates need.
std::vector<std::pair<int64_t, bool>> profiles_needed(const std::vector<Candidate>& candidates, int64_t global_batch);
// Step times for the layouts that fit, from `profiles`; then all ranked: fastest first,
// within 2% of each other (below the model's accuracy) the simpler layout.
void weigh_time(const Recipe& base, const Cluster& cluster, const Links& links, int64_t global_batch,
                const LayerTimesBy& profiles, const CoreSharing& cores, std::vector<Candidate>& candidates);

// Why the fastest layout `best` wins, in the decision guide's terms.
std::string reason(const std::vector<Candidate>& all, const Candidate& best, const Cluster& cluster, const Links& links);

// Tokens (or examples, for an image model) per example.
double tokens_per_example(const Recipe& recipe);

}  // namespace distrain
