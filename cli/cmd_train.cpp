// distrain train RECIPE [--set KEY=VALUE]... [--run-dir DIR] [--fresh]
//                       [--progress auto|bar|line|none] [--progress-every N]
#include <cmath>
#include <csignal>

#include "cli/commands.hpp"
#include "core/base/log.hpp"
#include "core/base/stop_signal.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/io/recipe.hpp"
#include "core/train/trainer.hpp"

namespace distrain::cli {

namespace {

// auto: the redrawn bar only where someone watches a terminal. A launcher (mpirun, srun)
// gives each rank a pseudo-terminal even when the job's output goes to a log, where the
// redraws would pile up on one endless line.
ProgressStyle progress_style(const std::string& name) {
  if (name == "bar") return ProgressStyle::bar;
  if (name == "none") return ProgressStyle::none;
  if (name == "auto" && stdout_is_terminal() && !launched_by_mpi()) return ProgressStyle::bar;
  return ProgressStyle::line;
}

}  // namespace

void register_train(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a model from a recipe; resumes from the newest checkpoint of its run folder");
  auto recipe_path = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  auto options = std::make_shared<TrainOptions>();
  auto progress = std::make_shared<std::string>("auto");
  cmd->add_option("recipe", *recipe_path, "Recipe file (TOML)")->required();
  cmd->add_option("--set", *overrides, "Override a recipe key: --set optimizer.learning_rate=0.01 (repeatable)");
  cmd->add_option("--run-dir", options->run_dir, "Run folder (default: the recipe's checkpoint.dir)");
  cmd->add_flag("--fresh", options->fresh, "Start over: delete the run folder's checkpoints and metrics first");
  auto resume_from = std::make_shared<std::string>();
  cmd->add_option("--resume-from", *resume_from,
                  "Go on from this checkpoint (a file, a name in the run folder, or a folder's newest) instead of the newest");
  auto init_from = std::make_shared<std::string>();
  cmd->add_option("--init-from", *init_from,
                  "Start from this checkpoint's weights (not its optimizer or step): a distrain checkpoint, or the "
                  "model.h5 of `distrain import`");
  cmd->add_option("--progress", *progress,
                  "auto: a bar on an interactive terminal (never under mpirun/srun), else lines; bar: redrawn in place; "
                  "line: plain lines for logs; none: no progress")
      ->check(CLI::IsMember({"auto", "bar", "line", "none"}))
      ->capture_default_str();
  cmd->add_option("--progress-every", options->progress.every, "Line progress: a line every N batches (default: about ten per epoch)")
      ->check(CLI::Range(1, 1000000));
  cmd->callback([=] {
    std::vector<std::string> sets = *overrides;
    if (!resume_from->empty()) sets.push_back("checkpoint.resume_from=" + toml_quoted(*resume_from));
    if (!init_from->empty()) sets.push_back("checkpoint.init_from=" + toml_quoted(*init_from));
    const Recipe recipe = load_recipe(*recipe_path, sets);
    options->progress.style = progress_style(*progress);
    log::info("distrain {}: training '{}' under {}\n  recipe {}", DISTRAIN_VERSION, recipe.name, recipe.strategy.name,
              recipe.file);
    for (const std::string& notice : recipe.notices) log::info("note: {}", notice);
    enable_graceful_stop();
    const TrainSummary s = train(recipe, *options);
    if (s.served) {
      fmt::print("[server {}] {} updates of {} parameters; workers were at most {} step(s) apart\n", s.served->server,
                 s.served->updates, s.served->parameters, s.served->max_lead);
      return;
    }
    if (s.stopped_by) {
      log::info("stopped by {} at step {}; rerun to resume", s.stopped_by == SIGINT ? "SIGINT" : "SIGTERM", s.steps);
      throw ExitCode{kExitStopped};
    }
    // Within 80 columns but the checkpoint's path: the figures, the speed, then the file.
    if (s.validated && recipe.data.token_data())
      log::info("done: {} steps, validation loss {:.4f} per token (perplexity {:.2f})\n  next-token accuracy {:.4f}; "
                "{:.1f}s training at {:.0f} tok/s\n  {}",
                s.steps, s.val_loss, std::exp(s.val_loss), s.val_accuracy, s.train_seconds, s.images_per_sec,
                s.last_checkpoint);
    else if (s.validated)
      log::info("done: {} steps, test accuracy {:.4f}, loss {:.4f}\n  {:.1f}s training at {:.0f} img/s\n  {}", s.steps,
                s.val_accuracy, s.val_loss, s.train_seconds, s.images_per_sec, s.last_checkpoint);
    else if (!s.last_checkpoint.empty())
      log::info("done: {} steps; {}", s.steps, s.last_checkpoint);
  });
}

}  // namespace distrain::cli
