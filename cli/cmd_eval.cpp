// distrain eval --ckpt FILE [--data PATH] [--json]: rebuilds the model from the recipe
// stored in the checkpoint, loads its weights, and evaluates the test split.
#include "cli/commands.hpp"
#include "core/base/json.hpp"
#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/data_placement.hpp"
#include "core/train/evaluate.hpp"

namespace distrain::cli {

void register_eval(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Evaluate a checkpoint on the test split of its dataset");
  struct Args {
    std::string ckpt, data, device = "cpu:0";
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--ckpt", a->ckpt, "Checkpoint file (ckpt-<step>.h5)")->required();
  cmd->add_option("--data", a->data, "Folder of IDX files, or HDF5 file (data.dataset = hdf5), to evaluate on (default: the recipe's data.path)");
  cmd->add_option("--device", a->device, "Device to evaluate on")->capture_default_str();
  cmd->add_flag("--json", a->json, "Print exactly one JSON object: loss, accuracy, examples");
  cmd->callback([a] {
    const Device device = Device::parse(a->device, "--device");
    // CPU devices are logical replicas; evaluation has one (a GPU index is checked when its backend starts).
    DT_USER_CHECK(!device.is_cpu() || device.index == 0, "--device {}: evaluation runs on one device; use cpu:0 or cuda:N",
                  a->device);
    const CheckpointHeader header = read_checkpoint_header(a->ckpt);
    Recipe recipe = parse_recipe(header.recipe, a->ckpt + " (stored recipe)");
    recipe.strategy.name = "one_device";
    recipe.strategy.devices = {a->device};
    if (!a->data.empty()) recipe.data.path = a->data;
    const Splits data = load_dataset(recipe.data, recipe.seed);
    auto strategy = make_strategy(recipe);
    load_weights(a->ckpt, strategy->model());
    strategy->sync_replicas();
    const bool on_device = place_data_on_devices(recipe, *strategy, data.test, DataUse::evaluation);
    const LossStats s = evaluate_dataset(*strategy, data.test, recipe.train.eval_batch, on_device);
    if (a->json)
      fmt::print("{}\n", dump_line(Json{{"loss", s.mean_loss()}, {"accuracy", s.accuracy()}, {"examples", s.count}}));
    else
      fmt::print("{} (step {}): test loss {:.4f}, accuracy {:.4f} over {} examples of {}\n", a->ckpt, header.state.step,
                 s.mean_loss(), s.accuracy(), s.count, data.test.source);
  });
}

}  // namespace distrain::cli
