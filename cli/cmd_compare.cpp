// distrain compare A.h5 B.h5 [--rtol R] [--scale model|variable]: do two checkpoints hold
// the same weights? For each variable of A: the largest absolute difference relative to
// the largest magnitude in the whole model of A (the default, the tolerance every
// equivalence in the docs is stated in: a small bias's own scale is rounding noise), or
// (--scale variable) in that variable of A, the stricter test. Exit 0
// when every variable is within rtol, 1 otherwise (as diff); a checkpoint holding NaN or
// infinity is refused on reading (exit 2), as everywhere.
#include <cmath>

#include "cli/commands.hpp"
#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "core/io/weight_diff.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain::cli {

void register_compare(CLI::App& app) {
  auto* cmd = app.add_subcommand("compare", "Compare the weights of two checkpoints of the same model");
  struct Args {
    std::string a, b, scale = "model";
    double rtol = 1e-5;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("a", args->a, "First checkpoint")->required();
  cmd->add_option("b", args->b, "Second checkpoint")->required();
  cmd->add_option("--rtol", args->rtol, "Largest accepted max|a-b| / scale per variable")->capture_default_str();
  cmd->add_option("--scale", args->scale, "model: max|a| over the whole model (as the docs state equivalences); variable: of each variable")
      ->check(CLI::IsMember({"variable", "model"}))
      ->capture_default_str();
  cmd->callback([args] {
    DT_USER_CHECK(std::isfinite(args->rtol) && args->rtol >= 0, "--rtol: must be a number >= 0, got {}", args->rtol);
    Recipe recipe = parse_recipe(read_checkpoint_header(args->a).recipe, args->a + " (stored recipe)");
    recipe.strategy = StrategySpec{};
    auto sa = make_strategy(recipe), sb = make_strategy(recipe);
    load_weights(args->a, sa->model());
    load_weights(args->b, sb->model());
    const ParamArena& pa = sa->model().params();
    std::vector<WeightDiff> diffs;
    double model_scale = 0;
    for (size_t i = 0; i < pa.variables().size(); ++i) {
      std::vector<float> x(static_cast<size_t>(pa.variables()[i].shape.numel())), y(x.size());
      pa.backend().download(pa.value(static_cast<int>(i)), x.data());
      pa.backend().download(sb->model().params().value(static_cast<int>(i)), y.data());
      diffs.push_back(weight_diff(x, y));
      model_scale = std::max(model_scale, diffs.back().scale);
    }
    bool same = true;
    for (size_t i = 0; i < diffs.size(); ++i) {
      const WeightDiff& d = diffs[i];
      const double relative = args->scale == "model" ? (model_scale > 0 ? d.max_abs / model_scale : d.max_abs) : d.relative;
      const bool ok = relative <= args->rtol;
      same = same && ok;
      const Variable& v = pa.variables()[i];
      fmt::print("{:<40} max|a-b| {:.3e}  relative {:.3e}{}\n", v.layer + "/" + v.name, d.max_abs, relative, ok ? "" : "  DIFFERS");
    }
    fmt::print("{}\n", same ? "same within rtol" : "different");
    if (!same) throw ExitCode(1);
  });
}

}  // namespace distrain::cli
