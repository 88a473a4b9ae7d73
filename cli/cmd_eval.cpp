// distrain eval --ckpt CKPT|RUN_DIR [--data PATH] [--set KEY=VALUE]... [--device D] [--json]:
// the loss and accuracy of a checkpoint on the test split of its recipe's data (or of
// --data), on one device in one process.
#include <cmath>
#include <filesystem>

#include "cli/commands.hpp"
#include "cli/inference.hpp"
#include "core/base/json.hpp"
#include "core/base/log.hpp"
#include "core/train/data_placement.hpp"
#include "core/train/evaluate.hpp"
#include "core/train/preflight.hpp"

namespace distrain::cli {

namespace {

struct EvalArgs {
  std::string ckpt, data, device = "cpu:0";
  std::vector<std::string> overrides;
  bool json = false;
};

// What --data takes for a language model: the kind of file its data.dataset reads.
void point_token_data_at(Recipe& recipe, const std::string& path, const std::string& ckpt) {
  std::error_code ec;
  const bool folder = std::filesystem::is_directory(path, ec);
  if (recipe.data.dataset == "text")
    DT_USER_CHECK(!folder, "--data {}: a folder; {} is a language model trained on data.dataset = \"text\": --data takes a "
                  "UTF-8 text file (its last data.validation_fraction is the test split)", path, ckpt);
  else
    DT_USER_CHECK(folder, "--data {}: {} is a language model trained on data.dataset = \"tokens\": --data takes a folder "
                  "holding {} and {} (token files)", path, ckpt, recipe.data.train_file, recipe.data.val_file);
  recipe.data.path = path;
}

// --data names an HDF5 file or a folder of IDX files (a text file or a folder of token
// files for a language model); the recipe's data.dataset follows it, so that a synthetic
// or HDF5 run can be evaluated on IDX files and the other way round.
void point_data_at(Recipe& recipe, const std::string& path, const std::string& ckpt) {
  if (recipe.data.dataset == "text" || recipe.data.dataset == "tokens") return point_token_data_at(recipe, path, ckpt);
  recipe.data.path = path;
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    if (recipe.data.dataset != "hdf5") recipe.data.num_classes = 0;  // from the labels, as an HDF5 recipe's default
    recipe.data.dataset = "hdf5";
  } else if (recipe.data.dataset == "hdf5" || recipe.data.dataset == "synthetic") {
    recipe.data.dataset = "fashion_mnist";
  }
}

// A language model's figures: the loss per token and its perplexity, next-token accuracy,
// and the count in tokens and windows (an example is a window; each of its tokens is scored).
void print_token_evaluation(const EvalArgs& a, const LoadedCheckpoint& loaded, const Dataset& test, const LossStats& s) {
  const double perplexity = std::exp(s.mean_loss());
  if (a.json) {
    fmt::print("{}\n", dump_line(Json{{"loss", s.mean_loss()}, {"accuracy", s.accuracy()}, {"examples", test.size()},
                                      {"tokens", s.count}, {"perplexity", perplexity}}));
    return;
  }
  fmt::print("{} (step {}): validation loss {:.4f} per token (perplexity {:.2f}), next-token accuracy {:.4f} over {} tokens "
             "({} windows of {}) of {}\n", loaded.header.path, loaded.header.state.step, s.mean_loss(), perplexity, s.accuracy(),
             s.count, test.size(), test.window, test.source);
}

void evaluate_checkpoint(const EvalArgs& a) {
  LoadedCheckpoint loaded = load_for_inference("eval", a.ckpt, a.overrides, a.device);
  Recipe& recipe = loaded.recipe;
  if (!a.data.empty()) point_data_at(recipe, a.data, loaded.header.path);
  const Splits data = load_dataset(recipe.data, recipe.seed);
  check_data_fits(recipe, data.test);
  auto strategy = strategy_with_weights(loaded);
  const bool on_device = place_data_on_devices(recipe, *strategy, data.test, DataUse::evaluation);
  const LossStats s = evaluate_dataset(*strategy, data.test, recipe.train.eval_batch, on_device);
  if (data.test.token_data()) return print_token_evaluation(a, loaded, data.test, s);
  if (a.json)
    fmt::print("{}\n", dump_line(Json{{"loss", s.mean_loss()}, {"accuracy", s.accuracy()}, {"examples", s.count}}));
  else
    fmt::print("{} (step {}): test loss {:.4f}, accuracy {:.4f} over {} examples of {}\n", loaded.header.path,
               loaded.header.state.step, s.mean_loss(), s.accuracy(), s.count, data.test.source);
}

}  // namespace

void register_eval(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Evaluate a checkpoint on the test split of its dataset");
  auto a = std::make_shared<EvalArgs>();
  cmd->add_option("--ckpt", a->ckpt, "Checkpoint file (ckpt-<step>.h5), or a run folder (its newest checkpoint)")->required();
  cmd->add_option("--data", a->data, "An HDF5 file or a folder of IDX files to evaluate on; for a language model a text file or a folder of "
                 "token files (default: the recipe's data)");
  cmd->add_option("--set", a->overrides, "Override a key of the stored recipe: --set train.eval_batch=256 (repeatable)");
  cmd->add_option("--device", a->device, "Device to evaluate on")->capture_default_str();
  cmd->add_flag("--json", a->json,
                "Print exactly one JSON object: loss, accuracy, examples (and, for a language model, tokens and perplexity)");
  cmd->callback([a] {
    if (a->json) log::set_info_stream(stderr);
    evaluate_checkpoint(*a);
  });
}

}  // namespace distrain::cli
