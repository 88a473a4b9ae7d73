// A small GPT recipe on random text, shared by the tests that train one under strategies
// and on a GPU.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

#include "core/base/rng.hpp"
#include "core/comm/mesh.hpp"
#include "core/strategy/replica_threads.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {

// `chars` random lowercase letters and spaces (every one of the 27 occurs), from a seed.
inline std::string random_text_file(const std::string& name, size_t chars, uint64_t seed) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() / name;
  Rng rng(seed);
  std::string text;
  for (size_t i = 0; i < chars; ++i) {
    const uint64_t k = rng.below(27);
    text += k == 26 ? ' ' : static_cast<char>('a' + k);
  }
  for (int k = 0; k < 26; ++k) text[static_cast<size_t>(k)] = static_cast<char>('a' + k);
  text[26] = ' ';
  std::ofstream(file, std::ios::binary) << text;
  return file.string();
}

// A recipe training `model` (its [model] table) on a text file of 27 characters in
// 16-token windows with AdamW, under `strategy` on `devices`.
inline std::string text_model_recipe(const std::string& model, const std::string& text_file, const std::string& strategy,
                                     const std::string& devices, int per_replica, const std::string& extra_strategy,
                                     const std::string& train_table) {
  return fmt::format(R"(
name = "gpt_equivalence"
seed = 11
[data]
dataset = "text"
path = "{}"
vocabulary = "characters"
seq_len = 16
{}
[optimizer]
type = "adamw"
learning_rate = 3e-3
beta_2 = 0.99
weight_decay = 0.1
[optimizer.schedule]
scaling = "none"
warmup_steps = 2
decay = "cosine"
[strategy]
name = "{}"
devices = [{}]
per_replica_batch = {}
check_every = 1
{}
[train]
{}
)",
                     text_file, model, strategy, devices, per_replica, extra_strategy, train_table);
}

// A 2-layer GPT, width 32, 2 heads, 16-token windows, 27 characters, AdamW.
inline std::string gpt_recipe(const std::string& text_file, const std::string& strategy, const std::string& devices,
                       int per_replica, const std::string& extra_strategy = "", double dropout = 0.0,
                       const std::string& train_table = "steps = 5\nvalidate = false") {
  const std::string model = fmt::format(R"(
[model]
input_shape = [16]
[[model.layers]]
type = "embedding"
name = "wte"
input_dim = 27
output_dim = 32
[[model.layers]]
type = "position_embedding"
name = "wpe"
[[model.layers]]
type = "repeat"
name = "h"
count = 2
  [[model.layers.layers]]
  type = "layer_norm"
  name = "ln_1"
  [[model.layers.layers]]
  type = "attention"
  name = "attn"
  heads = 2
  dropout = {}
  [[model.layers.layers]]
  type = "add"
  name = "attn_add"
  inputs = ["input", "attn"]
  [[model.layers.layers]]
  type = "layer_norm"
  name = "ln_2"
  [[model.layers.layers]]
  type = "dense"
  name = "fc"
  units = 64
  kernel_initializer = "normal"
  [[model.layers.layers]]
  type = "gelu"
  [[model.layers.layers]]
  type = "dense"
  name = "proj"
  units = 32
  kernel_initializer = "gpt2_residual"
  [[model.layers.layers]]
  type = "add"
  name = "mlp_add"
  inputs = ["attn_add", "proj"]
[[model.layers]]
type = "layer_norm"
name = "ln_f"
[[model.layers]]
type = "dense"
name = "head"
units = 27
tied_to = "wte"
use_bias = false
)",
                                        dropout);
  return text_model_recipe(model, text_file, strategy, devices, per_replica, extra_strategy, train_table);
}

// A 2-block Llama, width 32, 4 query heads over `kv_heads` key/value heads with rotary
// positions, RMS norms, a SwiGLU MLP of 64 units, no biases, an untied head.
inline std::string llama_recipe(const std::string& text_file, const std::string& strategy, const std::string& devices,
                                int per_replica, const std::string& extra_strategy = "",
                                const std::string& train_table = "steps = 5\nvalidate = false", int kv_heads = 2) {
  const std::string model = fmt::format(R"(
[model]
input_shape = [16]
[[model.layers]]
type = "embedding"
name = "embed_tokens"
input_dim = 27
output_dim = 32
[[model.layers]]
type = "repeat"
name = "layers"
count = 2
  [[model.layers.layers]]
  type = "rms_norm"
  name = "input_layernorm"
  [[model.layers.layers]]
  type = "attention"
  name = "self_attn"
  heads = 4
  kv_heads = {}
  rotary = true
  use_bias = false
  [[model.layers.layers]]
  type = "add"
  name = "attn_add"
  inputs = ["input", "self_attn"]
  [[model.layers.layers]]
  type = "rms_norm"
  name = "post_attention_layernorm"
  [[model.layers.layers]]
  type = "gated_mlp"
  name = "mlp"
  units = 64
  [[model.layers.layers]]
  type = "add"
  name = "mlp_add"
  inputs = ["attn_add", "mlp"]
[[model.layers]]
type = "rms_norm"
name = "norm"
[[model.layers]]
type = "dense"
name = "lm_head"
units = 27
use_bias = false
kernel_initializer = "normal"
)",
                                        kv_heads);
  return text_model_recipe(model, text_file, strategy, devices, per_replica, extra_strategy, train_table);
}

// "cpu:0", "cpu:1", ... for a recipe's strategy.devices.
inline std::string cpu_devices(int replicas) {
  std::string devices;
  for (int i = 0; i < replicas; ++i) devices += fmt::format("{}\"cpu:{}\"", i ? ", " : "", i);
  return devices;
}

// A mesh layout: its degrees and the other [strategy] keys.
struct MeshLayout {
  MeshShape shape;
  const char* keys;
};
// The layouts that exercise every axis's exchanges (tensor with sequence parallelism, a
// pipeline, data x tensor x pipeline with ZeRO-1): the staged path's checks.
inline constexpr MeshLayout kEveryAxisLayouts[] = {
    {{1, 2, 1}, "sequence_parallel = true"},
    {{1, 1, 2}, "micro_batches = 4"},
    {{2, 2, 2}, "micro_batches = 2\nshard_optimizer = true\nsequence_parallel = true"},
};
// The recipe's [strategy] keys for a mesh of `shape`, and `more`.
inline std::string mesh_keys(const MeshShape& shape, const std::string& more) {
  return fmt::format("data = {}\ntensor = {}\npipeline = {}\n{}", shape.data, shape.tensor, shape.pipeline, more);
}

// Trains the mesh recipe `text` afresh in `dir` on a mesh of threads of its shape, one
// train() per rank (the first failure aborts the others); rank 0's checkpoint and loss.
// staged: every exchange of every axis goes through a host copy (StagedCommunicator), the
// path a GPU rank's tensors take, here on CPU devices.
inline Trained train_on_thread_mesh(const std::string& text, const std::string& dir, const MeshShape& shape,
                                    bool staged = false) {
  const Recipe recipe = parse_recipe(text, dir + ".toml");
  std::filesystem::remove_all(dir);
  std::vector<Mesh> meshes = Mesh::over_threads(shape);
  if (staged)
    for (Mesh& m : meshes) m = m.staged(HostStaging(backend_for(Device{})), StagedCommunicator::Staged::every_tensor);
  TrainSummary first;
  ReplicaThreads ranks(shape.size(), 1, [&](const std::string& why) { meshes[0].abort(why); });
  ranks.run([&](int r) {
    TrainOptions options = quiet(dir);
    options.mesh = &meshes[static_cast<size_t>(r)];
    const TrainSummary s = train(recipe, options);
    std::fclose(options.out);
    if (r == 0) first = s;
  });
  return {checkpoint_values(recipe, first.last_checkpoint), first.loss};
}

}  // namespace distrain::test
