// libFuzzer target: the checkpoint reader (core/io/checkpoint.cpp) on a file holding the
// input bytes: read_checkpoint_header, then load_weights into a small fixed model whose
// variables the seed checkpoints hold. HDF5 itself is not instrumented: a crash inside
// libhdf5 on a corrupt file is HDF5's bug (reported, not fixed here).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/backend/backend.hpp"
#include "core/base/error.hpp"
#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "core/model/model.hpp"
#include "core/strategy/strategy.hpp"

namespace {

// The recipe of tests/fuzz/corpus/fuzz_checkpoint's seed, which this target writes when
// DISTRAIN_FUZZ_WRITE_SEED=FILE is set (scripts/fuzz.sh --seed).
const char* kRecipe = R"(
name = "fuzz"
[data]
dataset = "synthetic"
train_examples = 8
test_examples = 8
image_shape = [4, 4, 1]
[model]
input_shape = [4, 4, 1]
layers = [
  { type = "conv2d", filters = 2, kernel_size = 3 },
  { type = "flatten" },
  { type = "dense", units = 3 },
]
)";

distrain::Model& model() {
  static const distrain::Recipe recipe = distrain::parse_recipe(kRecipe, "fuzz.toml");
  static distrain::Model m(recipe.model(), recipe.file, distrain::backend_for(distrain::Device{distrain::DeviceType::cpu, 0}));
  return m;
}

std::string temp_path() {
  static const std::string path = "/tmp/distrain-fuzz-ckpt-" + std::to_string(::getpid()) + ".h5";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* out = std::getenv("DISTRAIN_FUZZ_WRITE_SEED")) {
    const distrain::Recipe recipe = distrain::parse_recipe(kRecipe, "fuzz.toml");
    auto strategy = distrain::make_strategy(recipe);
    strategy->model_state().initialize(1);
    distrain::save_checkpoint(out, strategy->model_state(), strategy->optimizer_state(), distrain::TrainState{3, 0, 3, {}, 0.5},
                              recipe.resolved_text());
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = temp_path();
  {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
    if (!f || std::fwrite(data, 1, size, f.get()) != size) __builtin_trap();
  }
  try {  // each reader on its own: a header error must not hide what load_weights does
    (void)distrain::read_checkpoint_header(path);
  } catch (const distrain::UserError&) {
  }
  try {
    distrain::load_weights(path, model());
  } catch (const distrain::UserError&) {
  }
  return 0;
}
