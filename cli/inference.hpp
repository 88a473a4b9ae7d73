// What eval and predict share: a checkpoint named by the user (a file, or a run folder's
// newest), the recipe stored in it with --set applied, and its model on one device in one
// process, weights loaded.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain::cli {

struct LoadedCheckpoint {
  CheckpointHeader header;  // header.path: the file chosen
  Recipe recipe;            // one_device on the device asked for
};

// `command` names the subcommand in messages ("eval", "predict").
LoadedCheckpoint load_for_inference(const std::string& command, const std::string& ckpt, const std::vector<std::string>& overrides,
                                    const std::string& device);
// The recipe's model on its device with the checkpoint's weights (after the data is checked).
std::unique_ptr<Strategy> strategy_with_weights(const LoadedCheckpoint& loaded);

}  // namespace distrain::cli
