// distrain train RECIPE [--set KEY=VALUE]... [--run-dir DIR] [--fresh]
#include "cli/commands.hpp"
#include "core/base/log.hpp"
#include "core/io/recipe.hpp"
#include "core/train/trainer.hpp"

namespace distrain::cli {

void register_train(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a model from a recipe; resumes from the newest checkpoint of its run folder");
  auto recipe_path = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  auto options = std::make_shared<TrainOptions>();
  cmd->add_option("recipe", *recipe_path, "Recipe file (TOML)")->required();
  cmd->add_option("--set", *overrides, "Override a recipe key: --set optimizer.learning_rate=0.01 (repeatable)");
  cmd->add_option("--run-dir", options->run_dir, "Run folder (default: the recipe's checkpoint.dir)");
  cmd->add_flag("--fresh", options->fresh, "Start over: delete the run folder's checkpoints and metrics first");
  cmd->callback([=] {
    const Recipe recipe = load_recipe(*recipe_path, *overrides);
    options->interactive = stdout_is_terminal();
    log::info("distrain {}: training '{}' ({}), strategy {}", DISTRAIN_VERSION, recipe.name, recipe.file, recipe.strategy.name);
    const TrainSummary s = train(recipe, *options);
    if (s.validated)
      log::info("done: {} steps, test accuracy {:.4f}, loss {:.4f}; {:.1f}s training at {:.0f} img/s; {}", s.steps,
                s.val_accuracy, s.val_loss, s.train_seconds, s.images_per_sec, s.last_checkpoint);
    else if (!s.last_checkpoint.empty())
      log::info("done: {} steps; {}", s.steps, s.last_checkpoint);
  });
}

}  // namespace distrain::cli
