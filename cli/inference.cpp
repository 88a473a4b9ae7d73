#include "cli/inference.hpp"

#include "core/comm/mpi_communicator.hpp"

namespace distrain::cli {

LoadedCheckpoint load_for_inference(const std::string& command, const std::string& ckpt, const std::vector<std::string>& overrides,
                                    const std::string& device) {
  DT_USER_CHECK(launcher_size() <= 1, "{} runs in one process on one device; run it without mpirun or srun ({} were "
                "launched)", command, launcher_size());
  const Device parsed = Device::parse(device, "--device");
  // CPU devices are logical replicas; one is used here (a GPU index is checked when its backend starts).
  DT_USER_CHECK(!parsed.is_cpu() || parsed.index == 0, "--device {}: {} runs on one device; use cpu:0 or cuda:N", device,
                command);
  LoadedCheckpoint loaded;
  loaded.header = read_checkpoint_header(find_checkpoint(ckpt));
  loaded.recipe = parse_recipe(loaded.header.recipe, loaded.header.path + " (stored recipe)", overrides);
  loaded.recipe.strategy.name = "one_device";
  loaded.recipe.strategy.devices = {device};
  // Nothing is updated: no optimizer state to place.
  loaded.recipe.strategy.zero.offload_optimizer = loaded.recipe.strategy.mesh.offload_optimizer = false;
  return loaded;
}

std::unique_ptr<Strategy> strategy_with_weights(const LoadedCheckpoint& loaded) {
  auto strategy = make_strategy(loaded.recipe);
  load_weights(loaded.header.path, strategy->model());
  strategy->sync_replicas();
  return strategy;
}

}  // namespace distrain::cli
