// distrain compare A.h5 B.h5 [--rtol R]: do two checkpoints hold the same weights?
// For each variable of A: the largest absolute difference relative to the largest
// magnitude in A (NaN or infinity on either side differs). Exit 0 when every variable
// is within rtol, 1 otherwise (as diff).
#include "cli/commands.hpp"
#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "core/io/weight_diff.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain::cli {

void register_compare(CLI::App& app) {
  auto* cmd = app.add_subcommand("compare", "Compare the weights of two checkpoints of the same model");
  struct Args {
    std::string a, b;
    double rtol = 1e-5;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("a", args->a, "First checkpoint")->required();
  cmd->add_option("b", args->b, "Second checkpoint")->required();
  cmd->add_option("--rtol", args->rtol, "Largest accepted max|a-b| / max|a| per variable")->capture_default_str();
  cmd->callback([args] {
    Recipe recipe = parse_recipe(read_checkpoint_header(args->a).recipe, args->a + " (stored recipe)");
    recipe.strategy = StrategySpec{};
    auto sa = make_strategy(recipe), sb = make_strategy(recipe);
    load_weights(args->a, sa->model());
    load_weights(args->b, sb->model());
    bool same = true;
    const ParamArena& pa = sa->model().params();
    for (size_t i = 0; i < pa.variables().size(); ++i) {
      const Variable& v = pa.variables()[i];
      std::vector<float> x(static_cast<size_t>(v.shape.numel())), y(x.size());
      pa.backend().download(pa.value(static_cast<int>(i)), x.data());
      pa.backend().download(sb->model().params().value(static_cast<int>(i)), y.data());
      const WeightDiff d = weight_diff(x, y);
      const bool ok = d.relative <= args->rtol;
      same = same && ok;
      fmt::print("{:<40} max|a-b| {:.3e}  relative {:.3e}{}\n", v.layer + "/" + v.name, d.max_abs, d.relative, ok ? "" : "  DIFFERS");
    }
    fmt::print("{}\n", same ? "same within rtol" : "different");
    if (!same) throw ExitCode(1);
  });
}

}  // namespace distrain::cli
