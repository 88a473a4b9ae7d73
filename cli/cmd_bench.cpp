// distrain bench RECIPE [--steps N] [--warmup N] [--json]: training-step throughput of one
// replica (forward, backward, gradient reduction, update) on a fixed synthetic batch of
// the recipe's input shape, so the figure does not depend on disk or data loading.
#include <algorithm>
#include <chrono>

#include "cli/commands.hpp"
#include "core/base/rng.hpp"
#include "core/io/recipe.hpp"
#include "core/backend/backend.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain::cli {

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure training-step throughput (median over steps after warm-up)");
  struct Args {
    std::string recipe;
    std::vector<std::string> overrides;
    int64_t steps = 50, warmup = 5;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("recipe", a->recipe, "Recipe file (TOML)")->required();
  cmd->add_option("--set", a->overrides, "Override a recipe key (repeatable)");
  cmd->add_option("--steps", a->steps, "Timed steps")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", a->warmup, "Untimed steps first")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->callback([a] {
    const Recipe recipe = load_recipe(a->recipe, a->overrides);
    auto strategy = make_strategy(recipe);
    Model& model = strategy->model();
    model.initialize(recipe.seed);
    const int64_t per = model.input_shape().numel();
    const int64_t classes = model.output_shape()[0];
    Batch batch;
    strategy->sync_replicas();
    batch.global_count = recipe.strategy.per_replica_batch * strategy->num_replicas();
    Rng rng(derive_seed(recipe.seed, static_cast<uint64_t>(strategy->rank())));
    for (int r = 0; r < strategy->local_replicas(); ++r) {
      ReplicaSlice s;
      s.count = recipe.strategy.per_replica_batch;
      for (int64_t i = 0; i < s.count * per; ++i) s.images.push_back(static_cast<float>(rng.below(256)));
      for (int64_t i = 0; i < s.count; ++i) s.labels.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(classes))));
      batch.replicas.push_back(std::move(s));
    }
    std::vector<double> ms;
    for (int64_t step = 0; step < a->warmup + a->steps; ++step) {
      const auto t0 = std::chrono::steady_clock::now();
      strategy->train_step(batch, StepInfo{step, static_cast<float>(recipe.optimizer.learning_rate), static_cast<uint64_t>(step)});
      const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (step >= a->warmup) ms.push_back(dt);
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
    const double ips = static_cast<double>(batch.global_count) / (median / 1000.0);
    if (a->json) {
      fmt::print(R"({{"recipe": "{}", "strategy": "{}", "replicas": {}, "global_batch": {}, "threads": {}, )"
                 R"("images_per_sec": {:.1f}, "step_ms": {{"min": {:.3f}, "median": {:.3f}, "max": {:.3f}}}, "steps": {}}})"
                 "\n",
                 recipe.name, strategy->name(), strategy->num_replicas(), batch.global_count, cpu_threads(), ips,
                 ms.front(), median, ms.back(), ms.size());
    } else {
      fmt::print("{} on {}: global batch {}, {} timed steps after {} warm-up\n", recipe.name, strategy->describe(),
                 batch.global_count, ms.size(), a->warmup);
      fmt::print("  {:.0f} images/s   step ms: min {:.2f}  median {:.2f}  max {:.2f}\n", ips, ms.front(), median, ms.back());
    }
  });
}

}  // namespace distrain::cli
