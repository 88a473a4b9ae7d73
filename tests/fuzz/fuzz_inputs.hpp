// What each fuzz target does with one input, shared by the libFuzzer targets
// (fuzz_*.cpp) and the unit test that replays every input a fuzzer ever crashed on
// (tests/fuzz/regressions/<target>/, tests/unit/test_bad_input.cpp). Bad input must end
// in a UserError, which is caught here; anything else (a crash, a sanitizer report,
// another exception) is a finding.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/base/error.hpp"
#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "core/model/model.hpp"
#include "core/strategy/strategy.hpp"
#include "datasets/idx.hpp"

namespace distrain::fuzz {

// fuzz_recipe: the input is recipe text; lines after a line "#--set" are KEY=VALUE
// overrides, as `distrain train RECIPE --set ...` applies them.
inline void recipe_input(std::span<const uint8_t> data) {
  const std::string input(data.begin(), data.end());
  static const std::string kMarker = "\n#--set\n";
  const size_t at = input.find(kMarker);
  std::vector<std::string> overrides;
  for (size_t pos = at == std::string::npos ? input.size() + 1 : at + kMarker.size(); pos <= input.size();) {
    const size_t end = std::min(input.find('\n', pos), input.size());
    overrides.push_back(input.substr(pos, end - pos));
    pos = end + 1;
  }
  try {
    const Recipe r = parse_recipe(input.substr(0, at), "fuzz.toml", overrides);
    (void)r.resolved_text();
  } catch (const UserError&) {
  }
}

// fuzz_idx: a 4-byte little-endian length L, L bytes of an IDX image file, then the label
// file (L clamped to what is there).
inline void idx_input(std::span<const uint8_t> data) {
  if (data.size() < 4) return;
  const size_t len = std::min<size_t>(
      uint32_t{data[0]} | uint32_t{data[1]} << 8 | uint32_t{data[2]} << 16 | uint32_t{data[3]} << 24, data.size() - 4);
  try {
    (void)parse_idx(data.subspan(4, len), data.subspan(4 + len), "fuzz-images", "fuzz-labels");
  } catch (const UserError&) {
  }
}

// fuzz_checkpoint: the input is a file for read_checkpoint_header and for load_weights
// into the small model of kCheckpointRecipe (the seed, write_checkpoint_seed, has its
// variables).
inline const char* kCheckpointRecipe = R"(
name = "fuzz"
[data]
dataset = "synthetic"
train_examples = 8
test_examples = 8
image_shape = [4, 4, 1]
[optimizer]
type = "sgd"
[train]
tensorboard = false
[model]
input_shape = [4, 4, 1]
layers = [
  { type = "conv2d", filters = 2, kernel_size = 3 },
  { type = "flatten" },
  { type = "dense", units = 3 },
]
)";

inline Model& checkpoint_model() {
  static const Recipe recipe = parse_recipe(kCheckpointRecipe, "fuzz.toml");
  static Model m(recipe.model(), recipe.file, backend_for(Device{DeviceType::cpu, 0}));
  return m;
}

inline void write_checkpoint_seed(const std::string& path) {
  const Recipe recipe = parse_recipe(kCheckpointRecipe, "fuzz.toml");
  auto strategy = make_strategy(recipe);
  strategy->model_state().initialize(1);
  save_checkpoint(path, strategy->model_state(), strategy->optimizer_state(), TrainState{3, 0, 3, {}, 0.5},
                  recipe.resolved_text());
}

inline void checkpoint_input(std::span<const uint8_t> data) {
  static const std::string path = "/tmp/distrain-fuzz-ckpt-" + std::to_string(::getpid()) + ".h5";
  {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
    if (!f || std::fwrite(data.data(), 1, data.size(), f.get()) != data.size()) throw Error("cannot write " + path);
  }
  try {  // each reader on its own: a header error must not hide what load_weights does
    (void)read_checkpoint_header(path);
  } catch (const UserError&) {
  }
  try {
    load_weights(path, checkpoint_model());
  } catch (const UserError&) {
  }
  std::remove(path.c_str());
}

}  // namespace distrain::fuzz
